"""An input whose backlog could not be read is unknown to the autoscaler, never zero.

``vf run --broker`` fills each node's input counters from the consumers' lag;
when a consumer's info cannot be read, the counters say why
(``unobserved``) and :class:`vfadapters.runtime.autoscaling.Autoscaler` passes
``Unobserved`` to ``decide_replicas``: the node keeps its replicas instead of
shrinking on a made-up zero.
"""

from __future__ import annotations

from typing import Any

from vfadapters.broker.run import EdgeCounters
from vfadapters.runtime.autoscaling import Autoscaler
from vfadapters.runtime.options import RunOptions
from vfadapters.runtime.state import LiveNode, Replica, RunState, Voice
from vfcore import FlowSpec, NodeSpec
from vfcore.runtime.layout import local_layout

SPEC = FlowSpec(
    "f",
    "batch",
    (
        NodeSpec("src", "producer"),
        NodeSpec("work", "processor", ("src",)),
        NodeSpec("sink", "consumer", ("work",)),
    ),
)


def state_with(counters: EdgeCounters) -> tuple[RunState, list[Any]]:
    opts = RunOptions(autoscale=True, max_replicas=4, scale_target=10, progress=False)
    layout = local_layout(SPEC, opts.layout_options())
    nodes = {n.name: LiveNode(SPEC.node(n.name), n) for n in layout.nodes}
    for node in nodes.values():
        node.in_edges = [[counters] for _ in node.spec.parents]
    nodes["work"].active = 3  # scaled up earlier
    started: list[Any] = []
    replicas = {
        pod.slot: Replica(node.name, pod.replica, pod.slot, pod.name, None)  # type: ignore[arg-type]
        for node in nodes.values()
        for pod in node.layout.pods
    }
    state = RunState(
        SPEC, opts, layout, Voice(lambda *a: None), nodes, replicas, {}, {}, [0] * 4096
    )
    return state, started


def test_an_unread_backlog_keeps_the_replicas() -> None:
    counters = EdgeCounters(None)
    counters.unobserved = "consumer work: timeout"
    state, started = state_with(counters)
    scaler = Autoscaler(state, started.append)
    scaler.tick(1.0)
    assert scaler.events == [] and state.nodes["work"].active == 3


def test_a_read_zero_backlog_shrinks_to_nb_tasks() -> None:
    counters = EdgeCounters(None)  # read: nothing pending, nothing in flight
    state, started = state_with(counters)
    scaler = Autoscaler(state, started.append)
    scaler.tick(1.0)
    assert [(e.replicas_from, e.replicas_to) for e in scaler.events] == [(3, 1)]
