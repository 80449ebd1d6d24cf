"""In-process autoscaling (``run(flow, RunOptions(autoscale=True))`` / ``vf run --autoscale``).

A burst of slow work backs a competing node up: ``vfcore.scaling.decide_replicas``
asks for more replicas and the executor starts them; when the backlog is gone
it asks for ``nb_tasks`` again and the extra replicas drain and retire. Every
item is still handled exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.flows import read_lines, write_flow
from vfadapters.local import RunOptions, run


@pytest.mark.slow
def test_a_growing_backlog_adds_replicas_and_an_idle_node_retires_them(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    flow = write_flow(
        tmp_path,
        f"""
        class Burst(ProducerNode):
            # 400 items at once, 4 s of silence (ample time to retire replicas even on a
            # loaded 2-core machine), then 5 more: fewer than one replica's target, so
            # they cannot ask for a replica again (20 could, on a slow machine)
            def open(self):
                self.i = 0

            def next(self):
                if self.i == 400:
                    time.sleep(4.0)
                if self.i >= 405:
                    raise StopIteration
                self.i += 1
                return self.i

        src = Burst(name="src")
        work = Tag("w", name="work", sleep=0.004)(src)     # 250 items/s per replica
        flow = Flow([Record({str(out)!r}, name="sink")(work)], flow_type=BATCH)
        """,
    )
    summary = run(
        flow,
        RunOptions(
            progress=False,
            autoscale=True,
            max_replicas=3,
            scale_interval_s=0.2,
            scale_target=10,
            log_sink=lambda *a: None,
        ),
    )
    assert summary.status == "completed", summary.error
    items = read_lines(out)
    assert sorted(i["x"] for i in items) == list(range(1, 406))  # exactly once
    events = [(e.node, e.replicas_from, e.replicas_to) for e in summary.scaling]
    assert events, "no autoscaling happened"
    assert events[0][0] == "work" and events[0][2] > events[0][1]  # grew first
    assert any(to < frm for _, frm, to in events), events  # then shrank
    assert summary.nodes["work"].max_replicas == 3
    assert summary.nodes["work"].replicas == 1  # back to nb_tasks at the end
    assert len({i["replica"] for i in items}) >= 2  # the extra replicas did work
    for e in summary.scaling:
        assert e.reason  # every change says why
