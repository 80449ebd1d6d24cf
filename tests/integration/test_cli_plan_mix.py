"""`vf plan --gpu-mode mix` end to end: the real command on the example MIG clusters."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.integration.cli_helpers import REPO, one_json_document, run_vf

CLUSTERS = REPO / "examples" / "clusters"
MIX_FLOW = REPO / "examples" / "mix_flow.py"

TOO_BIG = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class S(ProducerNode):
    def next(self): raise StopIteration

class LLM(ProcessorNode):
    def process(self, x): return x

class C(ConsumerNode):
    def consume(self, x): pass

llm = LLM(name="llm", device_type="gpu", gpu_memory_gib=90)(S(name="src"))
flow = Flow([C(name="sink")(llm)], flow_type=REALTIME)
"""


DETECTORS = """
from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

class S(ProducerNode):
    def next(self): raise StopIteration

class Detect(ProcessorNode):
    def process(self, x): return x

class C(ConsumerNode):
    def consume(self, x): pass

det = Detect(name="detect", nb_tasks={replicas}, device_type="gpu", gpu_memory_gib=9)
src = S(name="src", device_type="gpu")  # the example's nodes are all tainted GPU nodes
flow = Flow([C(name="sink", device_type="gpu")(det(src))], flow_type=REALTIME)
"""


def test_plan_json_has_a_mig_section_with_layouts_resources_and_a_config():
    result = run_vf(
        "plan", MIX_FLOW, "--cluster", CLUSTERS / "mig-idle", "--gpu-mode", "mix", "--json"
    )
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "fits" and doc["gpu_mode"] == "mix"
    mig = doc["mig"]
    assert mig["resources"] == {
        "detect": "nvidia.com/mig-1g.10gb",
        "embed": "nvidia.com/mig-3g.40gb",
    }
    assert set(mig["pod_resources"]) == {f"detect/{i}" for i in range(6)} | {"embed/0", "embed/1"}
    assert mig["cards_reconfigured"] == mig["cards_lower_bound"] == 1
    touched = [n for n in mig["nodes"] if n["touched"]]
    # re-laying one of a100-c's MIG cards (no mode change) beats partitioning h100-a's whole card
    assert [n["node"] for n in touched] == ["a100-c"]
    (node,) = touched
    assert node["label"] == (
        "kubectl label node a100-c nvidia.com/mig.config=vfcore-a100-c --overwrite"
    )
    assert not node["indices_assumed"] and not node["mode_change"]
    relaid = [c for c in node["cards"] if c["reconfigured"]]
    assert len(relaid) == 1 and all(i["start"] is not None for i in relaid[0]["instances"])
    assert relaid[0]["action"] == "repartition"
    config = mig["mig_parted_config"]
    assert config["version"] == "v1" and list(config["mig-configs"]) == ["vfcore-a100-c"]
    devices = sorted(d for e in config["mig-configs"]["vfcore-a100-c"] for d in e["devices"])
    assert devices == [relaid[0]["index"]]  # only the card that changes is listed
    assert set(doc["assignments"]) >= set(mig["pod_resources"])  # every MIG pod placed


def test_plan_text_prints_layouts_and_a_mig_parted_config_that_parses():
    result = run_vf("plan", MIX_FLOW, "--cluster", CLUSTERS / "mig-idle", "--gpu-mode", "mix")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "mix mode: FITS" in out
    assert "MIG layouts: 1 card(s) reconfigured on 1 node(s) (lower bound 1)" in out
    assert "detect requests nvidia.com/mig-1g.10gb" in out
    assert "[repartition]" in out and "create in order" not in out
    assert "one valid start slot per instance" in out
    assert "kubectl label node a100-c nvidia.com/mig.config=vfcore-a100-c --overwrite" in out
    lines = out.splitlines()
    first = lines.index("  version: v1")
    last = lines.index("", first)
    config = yaml.safe_load("\n".join(line[2:] for line in lines[first:last]))
    assert config["version"] == "v1" and "vfcore-a100-c" in config["mig-configs"]


def test_mig_config_writes_the_yaml_or_says_why_not(tmp_path: Path):
    target = tmp_path / "mig.yaml"
    result = run_vf(
        "plan",
        MIX_FLOW,
        "--cluster",
        CLUSTERS / "mig-idle",
        "--gpu-mode",
        "mix",
        "--mig-config",
        target,
    )
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert list(config["mig-configs"]) == ["vfcore-a100-c"]
    flow = tmp_path / "big.py"
    flow.write_text(TOO_BIG, encoding="utf-8")
    missing = tmp_path / "none.yaml"
    result = run_vf(
        "plan",
        flow,
        "--cluster",
        CLUSTERS / "mig-idle",
        "--gpu-mode",
        "mix",
        "--mig-config",
        missing,
    )
    assert result.returncode == 0, result.stderr
    assert not missing.exists()
    assert "no mig-parted config: the flow does not fit" in result.stderr
    assert "no mig-parted config: the flow does not fit" in result.stdout
    assert "mig-configs" not in result.stdout


def test_plan_on_busy_mig_nodes_uses_free_instances_and_never_wipes_a_card(tmp_path: Path):
    """mig-mixed: both nodes have GPU pods bound. Four 9 GiB pods fit the free 1g.10gb
    instances; six need a card re-partitioned on a busy node, which vfcore refuses."""
    fits = tmp_path / "four.py"
    fits.write_text(DETECTORS.format(replicas=4), encoding="utf-8")
    result = run_vf(
        "plan", fits, "--cluster", CLUSTERS / "mig-mixed", "--gpu-mode", "mix", "--json"
    )
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "fits"
    assert doc["mig"]["cards_reconfigured"] == 0
    assert doc["mig"]["mig_parted_config"] is None  # nothing to apply: no config offered
    assert doc["mig"]["config_withheld"] == "no card needs reconfiguring: nothing to apply"
    assert {doc["assignments"][f"detect/{i}"] for i in range(4)} == {"mig-a"}

    too_many = tmp_path / "six.py"
    too_many.write_text(DETECTORS.format(replicas=6), encoding="utf-8")
    result = run_vf(
        "plan", too_many, "--cluster", CLUSTERS / "mig-mixed", "--gpu-mode", "mix", "--json"
    )
    doc = one_json_document(result)
    assert doc["verdict"] == "does-not-fit"
    busy = next(p for p in doc["problems"] if p["code"] == "mig-busy-cards")
    # one idle card partitioned on either busy node would do (a tie: both touch 1 node, 1 card)
    named = re.search(r"bound: (mig-[ab]) \(1 card\(s\); ", busy["message"])
    assert named is not None, busy["message"]
    assert "drain" in busy["hint"]
    assert doc["fix"] is not None


def test_a_demand_no_card_holds_is_reported_with_its_fix(tmp_path: Path):
    flow = tmp_path / "big.py"
    flow.write_text(TOO_BIG, encoding="utf-8")
    result = run_vf("plan", flow, "--cluster", CLUSTERS / "mig-idle", "--gpu-mode", "mix", "--json")
    assert result.returncode == 0, result.stderr
    doc = one_json_document(result)
    assert doc["verdict"] == "does-not-fit"
    problem = next(p for p in doc["problems"] if p["code"] == "mig-demand-unresolvable")
    assert "79.25" in problem["hint"]
    assert doc["unplaced"][0]["kind"] == "unresolvable"
    strict = run_vf(
        "plan", flow, "--cluster", CLUSTERS / "mig-idle", "--gpu-mode", "mix", "--strict-preflight"
    )
    assert strict.returncode == 3
    assert "mig-demand-unresolvable" in strict.stdout
