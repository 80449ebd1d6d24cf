"""The flagship example: traffic cameras → detection → tracking → plates → a report.

    vf explain examples/traffic.py
    vf explain examples/traffic.py --gpu-mode shared --json

Four cameras' frames are decoded by one producer that tags each frame with its
camera id (``sets_keys``). A GPU detector runs four competing replicas; a
stateful tracker is partitioned by camera so each replica owns whole cameras;
a plate reader and the tracker are joined per event (trace id) before the sink.
"""

from __future__ import annotations

from vfcore import (
    BATCH,
    ConsumerNode,
    Flow,
    JoinPolicy,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
)

CAMERAS = 4
FRAMES_PER_CAMERA = 50


class CameraFrames(ProducerNode):
    """Synthetic frames: (camera, index, 64 bytes of pixels)."""

    finite = True

    def open(self) -> None:
        self._i = 0

    def next(self, ctx):
        if self._i >= CAMERAS * FRAMES_PER_CAMERA:
            raise StopIteration
        camera, index = self._i % CAMERAS, self._i // CAMERAS
        self._i += 1
        ctx.set_partition_key("camera", camera)
        return {"camera": camera, "index": index, "pixels": bytes([index % 256]) * 64}


class Detector(ProcessorNode):
    def process(self, frame):
        brightness = frame["pixels"][0]
        return {**frame, "boxes": [(0, 0, 8, 8)] if brightness % 3 == 0 else []}


class Tracker(OneTaskProcessorNode):
    def open(self) -> None:
        self.tracks: dict[int, int] = {}

    def process(self, detection):
        camera = detection["camera"]
        self.tracks[camera] = self.tracks.get(camera, 0) + len(detection["boxes"])
        return {"camera": camera, "index": detection["index"], "tracks": self.tracks[camera]}


class PlateReader(ProcessorNode):
    def process(self, frame):
        return {"plates": ["AB-123"] if frame["index"] % 10 == 0 else []}


class Report(ConsumerNode):
    def open(self) -> None:
        self.events = 0

    def consume(self, tracked, plates):
        self.events += 1


def build(name: str = "traffic") -> Flow:
    frames = CameraFrames(name="frames", sets_keys=["camera"])
    detector = Detector(
        name="detector", nb_tasks=4, device_type="gpu", gpu_count=1, gpu_memory_gib=10
    )(frames)
    tracker = Tracker(name="tracker", nb_tasks=2, partition_by="camera")(detector)
    plates = PlateReader(name="plates", nb_tasks=2)(frames)
    report = Report(
        name="report", join_policy=JoinPolicy(mode="trace", timeout_ms=None, missing="wait")
    )(tracker, plates)
    return Flow([report], flow_type=BATCH, name=name)


flow = build()
