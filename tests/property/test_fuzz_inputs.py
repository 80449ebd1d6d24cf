"""Fuzzing every input vf reads (issue 10, "What must exist"): bad input is a named error.

Mutated flow specs, flow files, cluster dumps and observation files —
truncated, wrong types, huge and negative quantities, duplicates, missing
fields, deep nesting — go to the public API (``FlowSpec.from_dict``,
``validate``, ``explain``, ``gpu_demand``, ``ClusterSnapshot.from_kubernetes``,
``plan``, ``observations_from_dict``, ``decide_flow``) and to every CLI command
(``explain``, ``plan``, ``scale``; ``vf run`` is left to its own fault tests:
every run forks workers). The laws:

* the API raises only ``InvalidFlowError``/``InvalidInputError`` (whose ids are
  kebab-case), never another exception;
* the CLI exits 0, 2 or 3 only; 2 comes with an ``error: <kebab-id>`` line;
  never ``internal-error``, never a traceback; ``--json`` prints one document;
* a few real ``vf`` processes run under a memory limit (RLIMIT_AS) and a
  timeout: bounded time and memory;
* a verdict never rests on a fact the input did not give: with one node made
  unreadable, ``fits`` needs the flow to fit without that node, and
  ``does-not-fit`` needs it not to fit even with that node idle and huge;
  otherwise the verdict is ``unknown``.

Most CLI examples run in-process (``vfadapters.cli.main``), which is fast; a
handful run as subprocesses.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tests.integration.cli_helpers import KEBAB
from tests.property.strategies import valid_specs
from vfcore import (
    RULES,
    FlowSpec,
    InvalidFlowError,
    InvalidInputError,
    explain,
    gpu_demand,
    validate,
)

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = REPO / "examples" / "clusters"
OBSERVATIONS = json.loads((REPO / "examples" / "observations.json").read_text())
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _cluster(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = CLUSTERS / name
    return (
        json.loads((folder / "nodes.json").read_text()),
        json.loads((folder / "pods.json").read_text()),
    )


BASE_CLUSTERS = {name: _cluster(name) for name in ("two-4gpu", "fragmented", "gpu-pool")}

# -- JSON values and document mutations -------------------------------------------

NASTY_STRINGS = (
    "10Gi",
    "-100",
    "9999999999999999999Ei",
    "1" * 5001,
    "1e400",
    "NaN",
    "",
    "0.5",
    "-0",
    "cpu",
    "nvidia.com/gpu",
    "\u0000",
    "détecteur",
)
NASTY_NUMBERS = (10**4000, -(10**30), 2**63, 2**64, -1, 0, 1, 10**7, 1e308, -0.0, 0.5)

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.sampled_from(NASTY_NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(NASTY_STRINGS),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (dict keys and list indices), the root first."""
    out = [prefix]
    if isinstance(doc, dict):
        for key in sorted(doc, key=str):
            out += _paths(doc[key], (*prefix, key))
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            out += _paths(item, (*prefix, i))
    return out


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mutated(draw: st.DrawFn, doc: Any, *, min_changes: int = 1, max_changes: int = 3) -> Any:
    """``doc`` with min..max_changes changes at random paths (the input is not modified)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(min_changes, max_changes))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths[1:] or paths))
        op = draw(
            st.sampled_from(
                ["replace", "delete", "duplicate", "nest", "number", "number", "number", "add"]
            )
        )
        if not path:
            doc = draw(json_values)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if op == "replace":
            parent[last] = draw(json_values)
        elif op == "number":
            parent[last] = draw(st.sampled_from(NASTY_NUMBERS + NASTY_STRINGS))
        elif op == "nest":
            parent[last] = _nest(parent[last], draw(st.sampled_from([2, 50, 300])))
        elif op == "delete":
            del parent[last]
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        elif op == "add" and isinstance(parent[last], dict):
            parent[last][draw(st.text(max_size=6))] = draw(json_values)
        else:
            parent[last] = draw(json_values)
    return doc


def _text_of(doc: Any, draw: st.DrawFn) -> str:
    """The document as JSON text, sometimes truncated (a dump cut off mid-write) or
    buried 100,000 levels deep (nesting that deep is built here, as text: hypothesis
    cannot print such a value)."""
    text = json.dumps(doc)
    damage = draw(st.integers(0, 7))  # hypothesis favours 0: keep it the intact text
    if damage == 7:
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif damage == 6:
        text = "[" * 100_000 + text + "]" * 100_000
    return text


def _small_gpu_spec(replicas: int, gpus: int) -> FlowSpec:
    return FlowSpec.from_dict(
        {
            "name": "fuzz",
            "nodes": [
                {"name": "src", "kind": "producer"},
                {
                    "name": "det",
                    "kind": "processor",
                    "parents": ["src"],
                    "nb_tasks": replicas,
                    "device_type": "gpu",
                    "gpu_count": gpus,
                },
                {"name": "out", "kind": "consumer", "parents": ["det"]},
            ],
        }
    )


def _assert_named(exc: InvalidFlowError | InvalidInputError) -> None:
    if isinstance(exc, InvalidFlowError):
        assert exc.issues, exc
        for issue in exc.issues:
            assert issue.rule in RULES, issue
    else:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", exc.rule), exc.rule
        assert exc.rule != "internal-error"


# -- the API ------------------------------------------------------------------------


@st.composite
def spec_documents(draw: st.DrawFn) -> Any:
    base = draw(valid_specs()).to_dict()
    return draw(mutated(base))


@settings(FUZZ, max_examples=250)
@given(spec_documents())
@example({"name": "f", "nodes": [{"name": "d", "kind": "processor", "gpu_memory_gib": "10Gi"}]})
@example({"name": "f", "nodes": [{"name": "d", "kind": "processor", "nb_tasks": 10**4000}]})
@example({"name": "f", "nodes": [{"name": "d", "kind": "processor", "requests": {"cpu": []}}]})
@example({"name": "f", "nodes": [{"name": "d", "kind": "processor", "join_policy": [1]}]})
def test_a_mutated_spec_document_is_a_spec_or_a_named_error(document):
    try:
        spec = FlowSpec.from_dict(document)
    except InvalidFlowError as exc:
        _assert_named(exc)
        event("refused on load")
        return
    issues = validate(spec)
    assert all(i.rule in RULES for i in issues)
    for mode in ("exclusive", "shared", "mix"):
        try:
            result = explain(spec, gpu_mode=mode)
            demand = gpu_demand(spec, gpu_mode=mode)
        except InvalidFlowError as exc:  # only a flow too large to list is refused here
            assert [i.rule for i in exc.issues if i.rule == "flow-too-large"]
            event("too large")
            return
        json.dumps(result.to_dict(), allow_nan=False)
        json.dumps(demand.to_dict(), allow_nan=False)
    event("valid" if not any(i.is_error for i in issues) else "invalid, reported")


@settings(FUZZ, max_examples=40)
@given(st.data())
def test_a_mutated_cluster_dump_gives_a_snapshot_and_a_three_valued_plan(data):
    from vfcore.cluster import ClusterSnapshot
    from vfcore.placement.plan import plan

    nodes, pods = BASE_CLUSTERS[data.draw(st.sampled_from(sorted(BASE_CLUSTERS)))]
    which = data.draw(st.sampled_from(["nodes", "pods", "both"]))
    if which in ("nodes", "both"):
        nodes = data.draw(mutated(nodes))
    if which in ("pods", "both"):
        pods = data.draw(mutated(pods))
    as_text = data.draw(st.booleans())
    nodes_in = _text_of(nodes, data.draw) if as_text else nodes
    pods_in = _text_of(pods, data.draw) if as_text else pods
    try:
        snapshot = ClusterSnapshot.from_kubernetes(nodes_in, pods_in)
    except InvalidInputError as exc:
        _assert_named(exc)
        event("refused")
        return
    spec = _small_gpu_spec(data.draw(st.integers(1, 5)), data.draw(st.integers(1, 2)))
    try:
        result = plan(spec, snapshot, gpu_mode=data.draw(st.sampled_from(["exclusive", "shared"])))
    except (InvalidFlowError, InvalidInputError) as exc:
        _assert_named(exc)
        event("plan refused")
        return
    doc = result.to_dict()
    assert doc["verdict"] in ("fits", "does-not-fit", "unknown")
    json.dumps(doc, allow_nan=False)
    event(f"verdict {doc['verdict']}")


@settings(FUZZ, max_examples=200)
@given(st.data())
def test_mutated_observations_are_parsed_or_a_named_error(data):
    from vfcore.scaling import decide_flow, observations_from_dict

    document = data.draw(mutated(OBSERVATIONS, min_changes=0, max_changes=2))
    spec = _scaling_spec()
    try:
        observations = observations_from_dict(document)
        result = decide_flow(spec, observations, target=data.draw(st.sampled_from([1, 10, 10**6])))
    except (InvalidFlowError, InvalidInputError) as exc:
        _assert_named(exc)
        event("refused")
        return
    json.dumps(result.to_dict(), allow_nan=False)
    event("decided")


_SCALING: list[FlowSpec] = []


def _scaling_spec() -> FlowSpec:
    if not _SCALING:
        from vfadapters.loading import load_flow

        loaded = load_flow(str(REPO / "examples" / "realtime_scaling.py"))
        assert not isinstance(loaded, FlowSpec)
        _SCALING.append(loaded.spec())
    return _SCALING[0]


# -- the unknown law: an unreadable node never decides the verdict -------------------

HUGE_ALLOCATABLE = {
    "cpu": "1000",
    "memory": "10Ti",
    "pods": "1000",
    "nvidia.com/gpu": "64",
    "ephemeral-storage": "10Ti",
}


def _unreadable(node: dict[str, Any], how: str) -> list[dict[str, Any]]:
    """``node`` made unreadable in one of the ways kubectl dumps really are."""
    broken = copy.deepcopy(node)
    status = broken.setdefault("status", {})
    if how == "no-allocatable":
        status.pop("allocatable", None)
        status.pop("capacity", None)
    elif how == "garbage-gpu":
        status.setdefault("allocatable", {})["nvidia.com/gpu"] = "four"
    elif how == "garbage-cpu":
        status.setdefault("allocatable", {})["cpu"] = "lots"
    elif how == "listed-twice":
        other = copy.deepcopy(node)
        other.setdefault("status", {}).setdefault("allocatable", {})["nvidia.com/gpu"] = "1"
        broken.setdefault("status", {}).setdefault("allocatable", {})["nvidia.com/gpu"] = "8"
        return [broken, other]
    return [broken]


def _verdict(spec: FlowSpec, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> str:
    from vfcore.cluster import ClusterSnapshot
    from vfcore.placement.plan import plan

    snapshot = ClusterSnapshot.from_kubernetes(
        {"kind": "NodeList", "items": nodes}, {"kind": "PodList", "items": pods}
    )
    return str(plan(spec, snapshot).verdict)


@settings(FUZZ, max_examples=20)
@given(
    cluster=st.sampled_from(["two-4gpu", "fragmented"]),
    victim=st.integers(0, 3),
    how=st.sampled_from(["no-allocatable", "garbage-gpu", "garbage-cpu", "listed-twice"]),
    replicas=st.integers(1, 6),
    gpus=st.integers(1, 2),
)
def test_an_unreadable_node_makes_the_verdict_unknown_unless_it_cannot_matter(
    cluster, victim, how, replicas, gpus
):
    nodes_doc, pods_doc = BASE_CLUSTERS[cluster]
    nodes, pods = nodes_doc["items"], pods_doc["items"]
    target = nodes[victim % len(nodes)]
    name = target["metadata"]["name"]
    others = [n for n in nodes if n is not target]
    not_on_it = [p for p in pods if p.get("spec", {}).get("nodeName") != name]
    spec = _small_gpu_spec(replicas, gpus)

    mutated_verdict = _verdict(spec, [*others, *_unreadable(target, how)], pods)
    if mutated_verdict == "fits":
        without = _verdict(spec, others, not_on_it)
        assert without == "fits", (name, how, "fits only by counting on an unreadable node")
    elif mutated_verdict == "does-not-fit":
        # The most the unreadable node could be: idle, its readable allocatable entries as
        # they are, a garbled entry at the node's status.capacity (kubelet never sets
        # allocatable above capacity), and anything nothing bounds huge.
        status = target.get("status", {})
        garbled = {"garbage-gpu": "nvidia.com/gpu", "garbage-cpu": "cpu"}.get(how)
        bound = dict(HUGE_ALLOCATABLE)
        if how in ("garbage-gpu", "garbage-cpu"):
            bound.update({k: v for k, v in status.get("allocatable", {}).items() if k != garbled})
            if garbled in status.get("capacity", {}):
                bound[garbled] = status["capacity"][garbled]
        largest = copy.deepcopy(target)
        largest.setdefault("status", {})["allocatable"] = bound
        largest["status"]["capacity"] = bound
        best = _verdict(spec, [*others, largest], not_on_it)
        assert best == "does-not-fit", (
            name,
            how,
            "does-not-fit although the node at its bound fits",
        )
    event(f"{how}: {mutated_verdict}")


LOST_POD_DAMAGE = {
    "nodeName a number": lambda pod: {**pod, "spec": {**pod["spec"], "nodeName": 5}},
    "spec a list": lambda pod: {**pod, "spec": [pod["spec"]]},
    "spec a string": lambda pod: {**pod, "spec": "x"},
    "not an object": lambda pod: 42,
    "a list": lambda pod: [pod],
}


@settings(FUZZ, max_examples=20)
@given(
    cluster=st.sampled_from(["two-4gpu", "fragmented", "gpu-pool"]),
    how=st.sampled_from(sorted(LOST_POD_DAMAGE)),
    replicas=st.integers(1, 6),
    gpus=st.integers(1, 2),
)
def test_a_running_pod_whose_node_cannot_be_read_never_leaves_a_fits(cluster, how, replicas, gpus):
    """It may be bound to any node (issue 23): no node's free capacity is known."""
    nodes_doc, pods_doc = BASE_CLUSTERS[cluster]
    hog = {
        "kind": "Pod",
        "metadata": {"name": "hog", "namespace": "x"},
        "spec": {
            "nodeName": nodes_doc["items"][0]["metadata"]["name"],
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    pods = [*pods_doc["items"], LOST_POD_DAMAGE[how](hog)]
    spec = _small_gpu_spec(replicas, gpus)
    verdict = _verdict(spec, nodes_doc["items"], pods)
    assert verdict != "fits", (cluster, how)
    if verdict == "does-not-fit":  # even with every node empty
        assert _verdict(spec, nodes_doc["items"], []) == "does-not-fit", (cluster, how)
    event(f"{how}: {verdict}")


# -- every CLI command, in process ---------------------------------------------------


def _main(argv: list[str]) -> tuple[int, str, str]:
    from vfadapters.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _assert_cli_contract(argv: list[str], code: int, out: str, err: str) -> None:
    where = f"vf {' '.join(argv)}\nstdout:\n{out[-2000:]}\nstderr:\n{err[-2000:]}"
    assert code in (0, 2, 3), where
    assert "internal-error" not in err, where
    assert "Traceback" not in out + err, where
    if code == 2:
        assert KEBAB.search(err) or KEBAB.search(out), where
    if "--json" in argv and (code == 0 or out.strip()):
        json.loads(out)  # exactly one document


FLOW_TEMPLATE = """
from vfcore import ConsumerNode, Flow, ProcessorNode, ProducerNode


class Source(ProducerNode):
    def next(self, ctx):
        raise StopIteration


class Step(ProcessorNode):
    def process(self, item):
        return item


class Sink(ConsumerNode):
    def consume(self, item):
        pass


src = Source(name="src")
det = Step(name="det", nb_tasks={nb_tasks!r}, device_type={device_type!r},
           gpu_count={gpu_count!r}, gpu_memory_gib={gpu_memory_gib!r})(src)
flow = Flow([Sink(name="out")(det)], flow_type={flow_type!r})
{tail}


def make():
    {factory}
    return flow
"""

FLOW_TAILS = (
    "",
    "raise SystemExit(4)",
    "import sys; sys.exit('bye')",
    "raise GeneratorExit()",
    "raise RecursionError('deep')",
    "print('noise on stdout')",
    "import threading; threading.Thread(target=lambda: None).start()",
    "flow = 42",
    "del flow",
)
FACTORY_BODIES = ("pass", "import sys; sys.exit(5)", "raise ValueError('no')", "return 7")
param_values = st.one_of(json_leaves, st.sampled_from(["gpu", "cpu", 1, 2, 10_000, 10_001]))


@st.composite
def flow_files(draw: st.DrawFn, folder: Path) -> str:
    source = FLOW_TEMPLATE.format(
        nb_tasks=draw(param_values),
        device_type=draw(param_values),
        gpu_count=draw(param_values),
        gpu_memory_gib=draw(param_values),
        flow_type=draw(st.sampled_from(["batch", "realtime", "stream"])),
        tail=draw(st.sampled_from(FLOW_TAILS)),
        factory=draw(st.sampled_from(FACTORY_BODIES)),
    )
    path = folder / "flow.py"
    path.write_text(source)
    return f"{path}:make" if draw(st.booleans()) else str(path)


@st.composite
def cli_cases(draw: st.DrawFn, folder: Path) -> list[str]:
    """One command line over mutated files written under ``folder``."""
    command = draw(st.sampled_from(["explain", "plan", "plan", "scale"]))
    if draw(st.integers(0, 3)) == 3:
        flow = draw(flow_files(folder))
    else:
        if command == "scale":
            spec = _scaling_spec().to_dict()
        elif command == "plan" and draw(st.booleans()):
            spec = _small_gpu_spec(draw(st.integers(1, 9)), draw(st.integers(1, 2))).to_dict()
        else:
            spec = draw(valid_specs()).to_dict()
        if draw(st.integers(0, 2)) == 2:
            spec = draw(mutated(spec))
        flow = str(folder / "spec.json")
        Path(flow).write_text(_text_of(spec, draw))
    argv = [command, flow]
    if command in ("plan", "scale") and (command == "plan" or draw(st.booleans())):
        nodes, pods = BASE_CLUSTERS[draw(st.sampled_from(sorted(BASE_CLUSTERS)))]
        cluster = folder / "cluster"
        cluster.mkdir(exist_ok=True)
        if draw(st.booleans()):
            nodes = draw(mutated(nodes))
        if draw(st.booleans()):
            pods = draw(mutated(pods))
        (cluster / "nodes.json").write_text(_text_of(nodes, draw))
        (cluster / "pods.json").write_text(_text_of(pods, draw))
        argv += ["--cluster", str(cluster)]
    if command == "scale":
        observations = draw(mutated(OBSERVATIONS)) if draw(st.booleans()) else OBSERVATIONS
        path = folder / "observations.json"
        path.write_text(_text_of(observations, draw))
        argv += ["--observations", str(path)]
    if command == "plan" and draw(st.integers(0, 3)) == 3:
        argv += ["--resources", draw(st.sampled_from(["det=cpu:-100", "det=cpu:2", "x=y"]))]
    if command == "plan" and draw(st.booleans()):
        argv.append("--strict-preflight")
    if command in ("explain", "plan"):
        argv += ["--gpu-mode", draw(st.sampled_from(["exclusive", "shared", "mix"]))]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_every_command_answers_mutated_files_with_0_2_or_3_and_named_errors(data):
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp:
        argv = data.draw(cli_cases(Path(tmp)))
        code, out, err = _main(argv)
        _assert_cli_contract(argv, code, out, err)
        named = KEBAB.search(err)
        event(f"{argv[0]}: exit {code}" + (f" {named.group(2)}" if code == 2 and named else ""))


# -- a few real processes: bounded time and memory ------------------------------------

MEMORY_LIMIT = 3 * 1024**3  # address space: enough for Python, OR-Tools and a plan


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
@settings(FUZZ, max_examples=5)
@given(st.data())
def test_real_vf_processes_answer_mutated_files_within_time_and_memory(data):
    with tempfile.TemporaryDirectory(prefix="vf-fuzz-") as tmp:
        argv = data.draw(cli_cases(Path(tmp)))
        env = {k: v for k, v in os.environ.items() if k not in ("VF_DEBUG", "VF_MAX_INPUT_MIB")}
        result = subprocess.run(
            [sys.executable, "-m", "vfadapters.cli", *argv],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limit_memory,
            check=False,
        )
        _assert_cli_contract(argv, result.returncode, result.stdout, result.stderr)
