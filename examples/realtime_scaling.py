"""A REALTIME flow to show autoscaling decisions (``vf scale``).

    vf scale examples/realtime_scaling.py --observations examples/observations.json
    vf scale examples/realtime_scaling.py --observations examples/observations.json \
        --gpu-autoscaling --cluster examples/clusters/gpu-pool --predict-hpa --json

Camera frames feed a GPU detector (two GPUs per replica, two replicas to start)
and a CPU plate reader, competing consumers both; a join fuses each frame's
detections and plates, partitioned by trace id so each replica owns whole
events. In a REALTIME flow the two processors are Deployments that KEDA may
scale; the partitioned join is a StatefulSet and stays at its two replicas.
"""

from __future__ import annotations

from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode

FRAMES = 200


class Frames(ProducerNode):
    """Synthetic frames (a finite stream, so a local run ends)."""

    finite = True

    def open(self) -> None:
        self._i = 0

    def next(self):
        if self._i >= FRAMES:
            raise StopIteration
        self._i += 1
        return {"index": self._i, "pixels": bytes([self._i % 256]) * 64}


class Detector(ProcessorNode):
    def process(self, frame):
        return {"index": frame["index"], "boxes": [(0, 0, 8, 8)] if frame["index"] % 3 else []}


class PlateReader(ProcessorNode):
    def process(self, frame):
        return {"plates": ["AB-123"] if frame["index"] % 10 == 0 else []}


class Fuse(ProcessorNode):
    def process(self, detections, plates):
        return {**detections, **plates}


class Sink(ConsumerNode):
    def open(self) -> None:
        self.events = 0

    def consume(self, event):
        self.events += 1


def build(name: str = "realtime-scaling") -> Flow:
    frames = Frames(name="frames")
    detector = Detector(
        name="detector",
        nb_tasks=2,
        device_type="gpu",
        gpu_count=2,
        requests={"cpu": "4", "memory": "16Gi"},
    )(frames)
    plates = PlateReader(name="plates", requests={"cpu": "1", "memory": "2Gi"})(frames)
    fuse = Fuse(name="fuse", nb_tasks=2, partition_by="trace_id")(detector, plates)
    sink = Sink(name="sink")(fuse)
    return Flow([sink], flow_type=REALTIME, name=name)


flow = build()
