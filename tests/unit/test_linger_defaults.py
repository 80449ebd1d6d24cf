"""How long a producer's segment waits for its source (``linger_s``) when the run names none.

Over a broker a message costs ~5 ms of CPU along a chain, so a BATCH flow's
producer lingers ``BROKER_LINGER_S`` (20 ms); a REALTIME flow over a broker, and
every flow of the local executor, ``LOCAL_LINGER_S`` (2 ms). A value the run
names is used as given, and a bad one is refused with ``invalid-run-option``.
"""

from __future__ import annotations

import math

import pytest

from vfadapters.broker.worker import node_config
from vfadapters.runtime.options import (
    BROKER_LINGER_S,
    LOCAL_LINGER_S,
    RunOptions,
    default_linger_s,
)
from vfcore import FlowSpec, NodeSpec
from vfcore.errors import InvalidInputError
from vfcore.runtime import broker_topology


def _chain(flow_type: str) -> FlowSpec:
    return FlowSpec(
        "demo",
        flow_type,  # type: ignore[arg-type]
        (
            NodeSpec("camera", "producer"),
            NodeSpec("detector", "processor", ("camera",)),
            NodeSpec("sink", "consumer", ("detector",)),
        ),
    )


def test_the_defaults_are_2_ms_locally_and_20_ms_for_a_batch_flow_over_a_broker():
    assert (LOCAL_LINGER_S, BROKER_LINGER_S) == (0.002, 0.02)
    assert default_linger_s(broker=True, realtime=False) == BROKER_LINGER_S
    assert default_linger_s(broker=True, realtime=True) == LOCAL_LINGER_S
    assert default_linger_s(broker=False, realtime=False) == LOCAL_LINGER_S
    assert default_linger_s(broker=False, realtime=True) == LOCAL_LINGER_S
    assert RunOptions().linger_s is None  # resolved by the transport and the flow's type


@pytest.mark.parametrize(
    ("flow_type", "given", "expected"),
    [
        ("batch", None, BROKER_LINGER_S),
        ("realtime", None, LOCAL_LINGER_S),
        ("batch", 0.005, 0.005),
        ("realtime", 0.0, 0.0),
    ],
)
def test_a_broker_replica_lingers_by_its_flow_type_unless_told(flow_type, given, expected):
    spec = _chain(flow_type)
    topo = broker_topology(spec, "run1")
    for node in ("camera", "detector", "sink"):
        cfg = node_config(spec, topo, node, 0, retries=2, linger_s=given)
        assert cfg.linger_s == expected, node


@pytest.mark.parametrize("bad", [-0.001, math.inf, math.nan, "20ms", True])
def test_a_linger_that_is_not_seconds_is_refused(bad):
    with pytest.raises(InvalidInputError) as err:
        RunOptions(linger_s=bad).check()
    assert err.value.rule == "invalid-run-option"
    assert "linger_s" in str(err.value)
