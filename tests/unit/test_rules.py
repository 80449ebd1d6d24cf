"""One example per validation rule, with the equality and "this is fine" edges."""

from __future__ import annotations

import pytest

from vfcore import (
    BATCH,
    REALTIME,
    RULES,
    ConsumerNode,
    Flow,
    FlowSpec,
    InvalidFlowError,
    JoinPolicy,
    NodeSpec,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
    require_valid,
    validate,
)


class Src(ProducerNode):
    def next(self, ctx):
        raise StopIteration


class Proc(ProcessorNode):
    def process(self, *inputs):
        return inputs[0]


class Stateful(OneTaskProcessorNode):
    def process(self, item):
        return item


class Sink(ConsumerNode):
    def consume(self, *inputs):
        pass


def rules_of(issues, severity=None):
    return sorted((i.rule, i.node) for i in issues if severity is None or i.severity == severity)


def chain(*mid, flow_type=BATCH, src=None):
    """src -> mid[0] -> mid[1] ... -> sink; returns the Flow."""
    node = src or Src(name="src", sets_keys=["camera"])
    for m in mid:
        node = m(node)
    return Flow([Sink(name="sink")(node)], flow_type=flow_type, name="t")


def spec_of(*nodes, flow_type="batch"):
    return FlowSpec("t", flow_type, tuple(nodes))


# -- parameters (raised at construction) -----------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"nb_tasks": "2"}, "nb_tasks='2'"),
        ({"nb_tasks": 0}, "nb_tasks=0"),
        ({"nb_tasks": -3}, "nb_tasks=-3"),
        ({"nb_tasks": True}, "nb_tasks=True"),
        ({"nb_tasks": 2.0}, "nb_tasks=2.0"),
        ({"gpu_count": 0, "device_type": "gpu"}, "gpu_count=0"),
        ({"gpu_count": False, "device_type": "gpu"}, "gpu_count=False"),
        ({"gpu_count": "1", "device_type": "gpu"}, "gpu_count='1'"),
        ({"gpu_memory_gib": 0, "device_type": "gpu"}, "gpu_memory_gib=0"),
        ({"gpu_memory_gib": -1.5, "device_type": "gpu"}, "gpu_memory_gib=-1.5"),
        ({"gpu_memory_gib": float("nan"), "device_type": "gpu"}, "gpu_memory_gib=nan"),
        ({"device_type": "tpu"}, "device_type='tpu'"),
        ({"device_type": "GPU"}, "device_type='GPU'"),
        ({"partition_by": ""}, "partition_by=''"),
        ({"partition_by": 3}, "partition_by=3"),
        ({"sets_keys": ["trace_id"]}, "trace_id"),
        ({"sets_keys": ["a", "a"]}, "names a field twice"),
        ({"gpu_resource_name": "gpu", "device_type": "gpu"}, "gpu_resource_name='gpu'"),
        ({"join_policy": {"mode": "trace"}}, "is not a JoinPolicy"),
    ],
)
def test_bad_parameter_is_refused_at_construction(kwargs, fragment):
    with pytest.raises(InvalidFlowError) as info:
        Proc(name="p", **kwargs)
    (issue,) = info.value.issues
    assert issue.rule == "invalid-parameter"
    assert issue.node == "p"
    assert fragment in issue.message
    assert issue.hint


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_name_is_refused(name):
    with pytest.raises(InvalidFlowError) as info:
        Proc(name=name)
    assert info.value.issues[0].rule == "invalid-parameter"


def test_every_bad_parameter_is_reported_at_once():
    with pytest.raises(InvalidFlowError) as info:
        Proc(name="p", nb_tasks=0, device_type="tpu", gpu_count=-1)
    assert len(info.value.issues) == 3
    assert "3 error(s)" in str(info.value)


@pytest.mark.parametrize("cls", [Src, Sink])
@pytest.mark.parametrize("kwargs", [{"nb_tasks": 2}, {"partition_by": "trace_id"}])
def test_producers_and_consumers_take_no_nb_tasks_or_partition(cls, kwargs):
    with pytest.raises(InvalidFlowError) as info:
        cls(name="s", **kwargs)
    (issue,) = info.value.issues
    assert (issue.rule, issue.node) == ("invalid-parameter", "s")
    assert "single" in issue.message


def test_spec_producer_with_nb_tasks_is_invalid():
    issues = validate(
        spec_of(NodeSpec("s", "producer", nb_tasks=2), NodeSpec("c", "consumer", ("s",)))
    )
    assert rules_of(issues, "error") == [("invalid-parameter", "s")]


def test_default_name_is_the_class_name():
    assert Proc().name == "Proc"


# -- wiring ----------------------------------------------------------------------


def test_calling_a_node_twice_is_an_error():
    src = Src(name="src")
    p = Proc(name="p")(src)
    with pytest.raises(InvalidFlowError) as info:
        p(src)
    assert info.value.issues[0].rule == "invalid-wiring"
    assert "already called" in info.value.issues[0].message


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda s: Proc(name="p")(), "no parents"),
        (lambda s: Proc(name="p")(s, s), "same parent twice"),
        (lambda s: Proc(name="p")("src"), "not a node"),
        (lambda s: Src(name="q")(s), "cannot have parents"),
    ],
)
def test_bad_wiring_is_refused(call, fragment):
    with pytest.raises(InvalidFlowError) as info:
        call(Src(name="src"))
    assert info.value.issues[0].rule == "invalid-wiring"
    assert fragment in info.value.issues[0].message


def test_process_arguments_follow_parent_order():
    a, b = Src(name="a"), Src(name="b")
    j = Proc(name="j")(b, a)
    assert j.spec().parents == ("b", "a")


def test_flow_finds_producers_by_walking_parents_and_orders_parents_first():
    a, b = Src(name="b-src"), Src(name="a-src")
    j = Proc(name="join")(a, b)
    flow = Flow([Sink(name="sink")(j)])
    assert [n.name for n in flow.spec().nodes] == ["a-src", "b-src", "join", "sink"]


@pytest.mark.parametrize(
    "consumers",
    [[], [Proc(name="p")], Sink(name="s"), None],
    ids=["empty", "a-processor", "not-a-list", "none"],
)
def test_flow_takes_a_list_of_consumers(consumers):
    with pytest.raises(InvalidFlowError) as info:
        Flow(consumers)  # type: ignore[arg-type]
    assert info.value.issues[0].rule == "invalid-parameter"


def test_flow_type_must_be_batch_or_realtime():
    with pytest.raises(InvalidFlowError):
        Flow([Sink(name="s")(Src(name="a"))], flow_type="streaming")  # type: ignore[arg-type]


# -- graph rules -------------------------------------------------------------------


def test_root_not_producer():
    orphan = Proc(name="orphan")
    # wire a join where one side has no producer upstream
    j = Proc(name="j")(Src(name="src"), orphan)
    flow = Flow([Sink(name="sink")(j)])
    assert rules_of(validate(flow), "error") == [("root-not-producer", "orphan")]


def test_cycle_names_the_nodes_on_the_cycle():
    src = Src(name="src")
    a, b = Proc(name="a"), Proc(name="b")
    a(src, b)
    b(a)
    flow = Flow([Sink(name="sink")(b)])
    (issue,) = [i for i in validate(flow) if i.rule == "cycle"]
    assert issue.node == "a"
    assert "a -> b -> a" in issue.message
    assert "['a', 'b']" in issue.message


def test_self_loop_is_a_cycle():
    spec = spec_of(
        NodeSpec("src", "producer"),
        NodeSpec("p", "processor", ("src", "p")),
        NodeSpec("sink", "consumer", ("p",)),
    )
    assert rules_of(validate(spec), "error") == [("cycle", "p")]


def test_duplicate_name():
    src = Src(name="x")
    flow = Flow([Sink(name="sink")(Proc(name="x")(src))])
    assert rules_of(validate(flow), "error") == [("duplicate-name", "x")]


def test_consumer_has_children():
    s1 = Sink(name="s1")(Src(name="src"))
    flow = Flow([Sink(name="s2")(s1)])
    assert rules_of(validate(flow), "error") == [("consumer-has-children", "s1")]


def test_unreachable_consumer_from_json():
    spec = FlowSpec.from_dict(
        {
            "name": "t",
            "flow_type": "batch",
            "nodes": [
                {"name": "src", "kind": "producer"},
                {"name": "sink", "kind": "consumer", "parents": ["src"]},
                {"name": "loop", "kind": "processor", "parents": ["loop"]},
                {"name": "lost", "kind": "consumer", "parents": ["loop"]},
            ],
        }
    )
    assert rules_of(validate(spec), "error") == [
        ("cycle", "loop"),
        ("unreachable-consumer", "lost"),
    ]


def test_unknown_parent_from_json():
    spec = spec_of(NodeSpec("src", "producer"), NodeSpec("sink", "consumer", ("sorce",)))
    errors = rules_of(validate(spec), "error")
    assert ("unknown-parent", "sink") in errors
    assert ("unreachable-consumer", "sink") in errors


def test_replicated_join_unpartitioned():
    j = Proc(name="join", nb_tasks=2)(Src(name="a"), Src(name="b"))
    flow = Flow([Sink(name="sink")(j)])
    (issue,) = [i for i in validate(flow) if i.is_error]
    assert (issue.rule, issue.node) == ("replicated-join-unpartitioned", "join")
    assert "partition_by='trace_id'" in issue.hint


def test_replicated_join_partitioned_by_trace_id_is_fine():
    j = Proc(name="join", nb_tasks=2, partition_by="trace_id")(Src(name="a"), Src(name="b"))
    assert rules_of(validate(Flow([Sink(name="sink")(j)])), "error") == []


def test_single_replica_join_needs_no_partition():
    j = Proc(name="join", nb_tasks=1)(Src(name="a"), Src(name="b"))
    assert validate(Flow([Sink(name="sink")(j)])) == ()


def test_partition_key_never_set():
    flow = chain(Proc(name="p", nb_tasks=2, partition_by="lane"))
    (issue,) = [i for i in validate(flow) if i.is_error]
    assert (issue.rule, issue.node) == ("partition-key-never-set", "p")
    assert "no node sets it" in issue.message


def test_partition_key_set_upstream_is_fine():
    flow = chain(Proc(name="p", nb_tasks=2, partition_by="camera"))  # src sets camera
    assert rules_of(validate(flow), "error") == []


def test_partition_key_set_by_a_middle_node_is_fine():
    flow = chain(
        Proc(name="tag", sets_keys=["lane"]), Proc(name="p", nb_tasks=2, partition_by="lane")
    )
    assert rules_of(validate(flow), "error") == []


def test_partition_key_missing_on_one_path_of_a_join():
    a = Src(name="a", sets_keys=["lane"])
    b = Src(name="b")
    j = Proc(name="j", nb_tasks=2, partition_by="lane")(a, b)
    (issue,) = [i for i in validate(Flow([Sink(name="s")(j)])) if i.is_error]
    assert issue.rule == "partition-key-never-set"
    assert "['b']" in issue.message


def test_a_node_setting_its_own_partition_key_does_not_count():
    flow = chain(Proc(name="p", nb_tasks=2, partition_by="lane", sets_keys=["lane"]))
    assert rules_of(validate(flow), "error") == [("partition-key-never-set", "p")]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"gpu_count": 1}, []),  # gpu_count=1 on CPU is the default: fine
        ({"gpu_count": 2}, [("gpu-parameter-on-cpu-node", "p")]),
        ({"gpu_memory_gib": 4}, [("gpu-parameter-on-cpu-node", "p")]),
        ({"gpu_resource_name": "nvidia.com/gpu"}, [("gpu-parameter-on-cpu-node", "p")]),
        (
            {"device_type": "gpu", "gpu_count": 2, "gpu_memory_gib": 4},
            [("gpu-memory-with-multi-gpu", "p")],
        ),
        ({"device_type": "gpu", "gpu_count": 1, "gpu_memory_gib": 4}, []),
        (
            {"device_type": "gpu", "gpu_count": 2, "gpu_resource_name": "nvidia.com/mig-1g.10gb"},
            [("mig-cannot-span", "p")],
        ),
        ({"device_type": "gpu", "gpu_count": 1, "gpu_resource_name": "nvidia.com/mig-1g.10gb"}, []),
    ],
    ids=[
        "gpu-count-1-on-cpu-is-fine",
        "gpu-count-2-on-cpu",
        "memory-on-cpu",
        "resource-on-cpu",
        "memory-with-two-gpus",
        "memory-with-one-gpu-is-fine",
        "two-mig-slices",
        "one-mig-slice-is-fine",
    ],
)
def test_gpu_rules(kwargs, expected):
    assert rules_of(validate(chain(Proc(name="p", **kwargs))), "error") == expected


def test_mig_cannot_span_with_deploy_wide_resource():
    flow = chain(Proc(name="p", device_type="gpu", gpu_count=2))
    assert validate(flow) == ()
    issues = validate(flow, gpu_resource_name="nvidia.com/mig-3g.40gb")
    assert rules_of(issues, "error") == [("mig-cannot-span", "p")]
    assert "--gpu-resource-name" in issues[0].message


def test_shared_mode_warns_about_undeclared_memory():
    flow = chain(Proc(name="p", device_type="gpu"))
    assert rules_of(validate(flow, gpu_mode="shared")) == [("gpu-memory-undeclared", "p")]
    assert validate(flow, gpu_mode="exclusive") == ()


def test_unknown_gpu_mode_is_refused():
    with pytest.raises(ValueError, match="invalid-gpu-mode"):
        validate(chain(), gpu_mode="timeslice")


# -- joins -------------------------------------------------------------------------


def _time_join(policy, nb_tasks=1, partition_by=None, parents=("a", "b")):
    srcs = [Src(name=n) for n in parents]
    j = Proc(name="j", nb_tasks=nb_tasks, partition_by=partition_by, join_policy=policy)(*srcs)
    return Flow([Sink(name="s")(j)], flow_type=REALTIME)


def test_replicated_time_join():
    flow = _time_join(JoinPolicy(mode="time", tolerance_ms=40), nb_tasks=2, partition_by="trace_id")
    assert rules_of(validate(flow), "error") == [("replicated-time-join", "j")]


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        (JoinPolicy(mode="time", tolerance_ms=40, collect={"c": 100}), "not parents"),
        (JoinPolicy(mode="time", tolerance_ms=40, collect={"a": 100, "b": 50}), "every parent"),
        (JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=100, quorum=3), "exceeds the 2"),
        (
            JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=100, quorum=2, collect={"b": 50}),
            "exceeds the 1",
        ),
    ],
    ids=[
        "collect-non-parent",
        "every-parent-collected",
        "quorum-above-parents",
        "quorum-above-synchronised",
    ],
)
def test_join_policy_inconsistent_with_parents(policy, fragment):
    issues = [i for i in validate(_time_join(policy)) if i.is_error]
    assert [(i.rule, i.node) for i in issues] == [("invalid-join-policy", "j")]
    assert fragment in issues[0].message


def test_quorum_equal_to_synchronised_parents_is_fine():
    policy = JoinPolicy(mode="time", tolerance_ms=40, timeout_ms=100, quorum=2)
    assert rules_of(validate(_time_join(policy)), "error") == []


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"mode": "time"}, "needs tolerance_ms > 0"),
        ({"mode": "time", "tolerance_ms": 0}, "needs tolerance_ms > 0"),
        ({"tolerance_ms": 40}, "applies only to mode='time'"),
        ({"quorum": 2}, "applies only to mode='time'"),
        ({"collect": {"a": 10}}, "applies only to mode='time'"),
        ({"mode": "time", "tolerance_ms": 40, "quorum": 1}, "timeout_ms is None"),
        ({"mode": "time", "tolerance_ms": 40, "timeout_ms": 9, "quorum": 0}, "quorum=0"),
        ({"mode": "time", "tolerance_ms": 40, "collect": {"a": 0}}, "must be a number > 0"),
        ({"missing": "wait", "timeout_ms": 500}, "waits forever"),
        ({"missing": "retry"}, "missing='retry'"),
        ({"mode": "window"}, "mode='window'"),
        ({"timeout_ms": -1}, "timeout_ms=-1"),
        ({"max_pending": 0}, "max_pending=0"),
        ({"max_pending": True}, "max_pending=True"),
    ],
)
def test_invalid_join_policy_at_construction(kwargs, fragment):
    with pytest.raises(InvalidFlowError) as info:
        JoinPolicy(**kwargs)
    assert {i.rule for i in info.value.issues} == {"invalid-join-policy"}
    assert any(fragment in i.message for i in info.value.issues), info.value.issues


def test_join_policy_defaults_per_flow_type():
    assert JoinPolicy.default_for(BATCH) == JoinPolicy(timeout_ms=None, missing="wait")
    realtime = JoinPolicy.default_for(REALTIME)
    assert (realtime.timeout_ms, realtime.missing) == (10_000, "drop")


# -- warnings ----------------------------------------------------------------------


def test_output_unread():
    src = Src(name="src")
    Proc(name="dangling")(src)
    flow = Flow([Sink(name="sink")(src)])
    assert rules_of(validate(flow)) == [("output-unread", "dangling")]


def test_singleton_replicas_ignored():
    assert rules_of(validate(chain(Stateful(name="t", nb_tasks=3)))) == [
        ("singleton-replicas-ignored", "t")
    ]


def test_partitioned_one_task_node_scales_without_warning():
    assert validate(chain(Stateful(name="t", nb_tasks=3, partition_by="trace_id"))) == ()


def test_partition_without_replicas():
    assert rules_of(validate(chain(Proc(name="p", partition_by="trace_id")))) == [
        ("partition-without-replicas", "p")
    ]


def test_join_policy_ignored_on_single_parent():
    flow = chain(Proc(name="p", join_policy=JoinPolicy(timeout_ms=5)))
    assert rules_of(validate(flow)) == [("join-policy-ignored", "p")]


def test_realtime_join_without_timeout_waits_forever():
    policy = JoinPolicy(mode="trace")  # missing='drop' but no timeout: never drops
    assert rules_of(validate(_time_join(policy))) == [("join-waits-forever", "j")]
    waiting = JoinPolicy(mode="trace", missing="wait")
    assert validate(_time_join(waiting)) == ()
    assert validate(_time_join(JoinPolicy(timeout_ms=500))) == ()


def test_effective_join_policy_falls_back_to_the_flow_default():
    from vfcore.flow.validate import effective_join_policy

    spec = _time_join(None).spec()
    assert effective_join_policy(spec.node("j"), "realtime") == JoinPolicy.default_for("realtime")
    assert effective_join_policy(spec.node("a"), "realtime") is None


def test_autoscaling_batch_flow():
    assert rules_of(validate(chain(), autoscaling=True)) == [("autoscaling-batch-flow", None)]
    assert validate(chain(flow_type=REALTIME), autoscaling=True) == ()


# -- the API edge ------------------------------------------------------------------


def test_require_valid_lists_every_error():
    j = Proc(name="join", nb_tasks=2)(Src(name="a"), Src(name="b"))
    flow = Flow([Sink(name="sink")(j), Sink(name="sink")(Src(name="c"))])
    with pytest.raises(InvalidFlowError) as info:
        require_valid(flow)
    assert {i.rule for i in info.value.issues if i.is_error} == {
        "duplicate-name",
        "replicated-join-unpartitioned",
    }
    assert isinstance(info.value, ValueError)


def test_require_valid_returns_the_spec():
    flow = chain()
    assert require_valid(flow) == flow.spec()


def test_errors_come_before_warnings():
    src = Src(name="src")
    Proc(name="a-dangling")(src)
    j = Proc(name="z-join", nb_tasks=2)(src, Src(name="b"))
    issues = validate(Flow([Sink(name="sink")(j)]))
    assert [i.severity for i in issues] == ["error", "warning"]


def test_every_rule_has_a_test_here():
    import pathlib

    text = (
        pathlib.Path(__file__).read_text()
        + pathlib.Path(__file__).with_name("test_rules_docs.py").read_text()
    )
    missing = [r for r in RULES if f'"{r}"' not in text]
    assert missing == []


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ([], "must be a JSON object"),
        ({"nodes": "x"}, "needs a 'nodes' list"),
        ({"nodes": [], "flow_type": "stream"}, "flow_type 'stream'"),
        ({"nodes": [{"kind": "producer"}]}, "needs a string 'name'"),
        ({"nodes": [{"name": "a", "kind": "source"}]}, "kind 'source'"),
        (
            {"nodes": [{"name": "a", "kind": "producer", "colour": 1}]},
            "unknown field(s) ['colour']",
        ),
        ({"nodes": [{"name": "a", "kind": "processor", "parents": "src"}]}, "list of node names"),
        ({"nodes": [], "extra": 1}, "unknown field(s) ['extra']"),
    ],
)
def test_invalid_spec_documents_are_refused_with_the_field(document, fragment):
    with pytest.raises(InvalidFlowError) as info:
        FlowSpec.from_dict(document)
    (issue,) = info.value.issues
    assert issue.rule == "invalid-spec"
    assert fragment in issue.message


def test_invalid_join_policy_in_a_spec_names_the_node():
    doc = {"nodes": [{"name": "j", "kind": "processor", "join_policy": {"mode": "time"}}]}
    with pytest.raises(InvalidFlowError) as info:
        FlowSpec.from_dict(doc)
    assert [(i.rule, i.node) for i in info.value.issues] == [("invalid-join-policy", "j")]


def test_json_that_does_not_parse_is_an_invalid_spec():
    with pytest.raises(InvalidFlowError) as info:
        FlowSpec.from_json("{not json")
    assert info.value.issues[0].rule == "invalid-spec"
    assert "line 1" in info.value.issues[0].message


# -- size limits (issue 10, item 8) ------------------------------------------------


@pytest.mark.parametrize(
    ("nb_tasks", "valid"),
    [(10_000, True), (10_001, False), (10**7, False), (10**5000, False)],
    ids=["at-the-limit", "one-over", "ten-million", "5001-digits"],
)
def test_nb_tasks_is_limited_to_ten_thousand_replicas_per_node(nb_tasks, valid):
    spec = spec_of(
        NodeSpec("src", "producer"),
        NodeSpec("det", "processor", ("src",), nb_tasks=nb_tasks),
        NodeSpec("out", "consumer", ("det",)),
    )
    errors = [i for i in validate(spec) if i.is_error]
    assert (errors == []) is valid
    if not valid:
        assert [(i.rule, i.node) for i in errors] == [("invalid-parameter", "det")]
        assert "over the limit of 10000 replicas per node" in errors[0].message
        with pytest.raises(InvalidFlowError):
            Proc(name="det", nb_tasks=nb_tasks)


def test_flow_too_large_is_reported_by_validate_and_raised_by_explain_and_gpu_demand():
    from vfcore import explain, gpu_demand

    def flow(replicas):
        dets = [
            NodeSpec(f"d{i}", "processor", ("src",), nb_tasks=replicas, device_type="gpu")
            for i in range(10)
        ]
        return spec_of(
            NodeSpec("src", "producer"),
            *dets,
            NodeSpec("out", "consumer", tuple(d.name for d in dets)),
        )

    at_limit = flow(9_999)  # 99,990 + producer + consumer = 99,992 pods: fine
    assert [i for i in validate(at_limit) if i.is_error] == []
    assert gpu_demand(at_limit).total == (("nvidia.com/gpu", 99_990),)
    over = flow(10_000)  # 100,002 pods
    assert rules_of(validate(over)) == [("flow-too-large", None)]
    for call in (explain, gpu_demand, require_valid):
        with pytest.raises(InvalidFlowError) as info:
            call(over)
        assert info.value.issues[0].rule == "flow-too-large"


@pytest.mark.parametrize(
    ("memory", "valid"),
    [
        (1_048_576, True),  # the limit itself
        (1_048_576.5, False),
        (1_048_577, False),
        (10**400, False),  # once an OverflowError inside math.isfinite
        (float("inf"), False),
        (float("nan"), False),
        (0, False),
    ],
    ids=["at-limit", "half-over", "one-over", "10^400", "inf", "nan", "zero"],
)
def test_gpu_memory_gib_is_a_bounded_positive_number(memory, valid):
    spec = spec_of(
        NodeSpec("src", "producer"),
        NodeSpec("det", "processor", ("src",), device_type="gpu", gpu_memory_gib=memory),
        NodeSpec("out", "consumer", ("det",)),
    )
    errors = [i for i in validate(spec) if i.is_error]
    if valid:
        assert errors == []
    else:
        assert [(i.rule, i.node) for i in errors] == [("invalid-parameter", "det")]
        assert "must be a number > 0 and <= 1,048,576" in errors[0].message


@pytest.mark.parametrize(
    ("kwargs", "valid"),
    [
        ({"mode": "time", "tolerance_ms": 10**12, "timeout_ms": 10**12, "missing": "drop"}, True),
        ({"mode": "time", "tolerance_ms": 10**12 + 1}, False),
        ({"mode": "time", "tolerance_ms": 10**400}, False),  # once an OverflowError
        ({"mode": "trace", "timeout_ms": 10**5000, "missing": "drop"}, False),  # once a ValueError
        ({"mode": "trace", "max_pending": -(10**5000)}, False),
        ({"mode": 10**5000}, False),
    ],
    ids=["at-limit", "one-over", "10^400", "5001-digit-timeout", "5001-digit-pending", "mode"],
)
def test_join_policy_numbers_are_bounded_and_huge_ones_are_named_errors(kwargs, valid):
    if valid:
        assert JoinPolicy(**kwargs).tolerance_ms == 10**12
        return
    with pytest.raises(InvalidFlowError) as info:
        JoinPolicy(**kwargs)
    assert info.value.issues[0].rule == "invalid-join-policy"
    assert len(info.value.issues[0].message) < 400
