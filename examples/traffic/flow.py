"""The flagship flow: traffic cameras → detection → tracking and pose → fused events.

    vf explain examples/traffic/flow.py
    vf plan    examples/traffic/flow.py --cluster examples/traffic/cluster
    vf run     examples/traffic/flow.py

    cameras ──► decode (×2) ──► detector (GPU ×2) ──┬─► tracker (×2, by camera) ──┐
                                                     └─► pose (GPU, 2 GiB) ────────┴─► fuse (×2, by trace) ──► events

- ``cameras``: four synthetic traffic cameras, 60 frames each; every frame is a
  compressed 96×128 RGB image of cars driving across the road, tagged with its
  camera (``ctx.set_partition_key("camera", ...)``).
- ``decode``: two competing replicas decompress frames into numpy arrays.
- ``detector``: a small convolutional model (a 4×4 box filter then a 2×2 max
  pool) finds bright blobs (cars). It runs with torch when torch is installed,
  on the GPU ``ctx.device`` names when there is one, and in numpy otherwise —
  same weights, same answers.
- ``tracker``: stateful, partitioned by camera: each replica owns whole cameras
  and gives each car a stable track id across frames.
- ``pose``: a tiny network on each car's crop (GPU, ``gpu_memory_gib=2``: it
  shares a card with the detectors on one host).
- ``fuse``: a join of tracker and pose, replicated and partitioned by trace id
  so both halves of a frame meet on one replica.
- ``events``: writes one JSON line per frame to ``$TRAFFIC_EVENTS`` (default
  ``<temp dir>/vf-traffic/events.jsonl``, e.g. ``/tmp/vf-traffic/events.jsonl``,
  replaced by each run; the run's log names it).
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from typing import Any

import numpy as np

from vfcore import (
    BATCH,
    ConsumerNode,
    Flow,
    OneTaskProcessorNode,
    ProcessorNode,
    ProducerNode,
)

CAMERAS = 4
FRAMES_PER_CAMERA = 60
HEIGHT, WIDTH = 96, 128
CARS_PER_CAMERA = 3


def _car_positions(camera: int, index: int) -> list[tuple[int, int]]:
    """Top-left corners of the cars of one camera at one frame: they drive right."""
    out = []
    for car in range(CARS_PER_CAMERA):
        lane_y = 12 + car * 28
        speed = 2 + (camera + car) % 3
        x = (8 + car * 37 + camera * 11 + index * speed) % (WIDTH - 16)
        out.append((lane_y, x))
    return out


class Cameras(ProducerNode):
    """Four cameras interleaved; each frame is zlib-compressed RGB bytes."""

    finite = True

    def open(self) -> None:
        self.i = 0
        self.rng = np.random.default_rng(7)

    def next(self, ctx: Any) -> dict[str, Any]:
        if self.i >= CAMERAS * FRAMES_PER_CAMERA:
            raise StopIteration
        camera, index = self.i % CAMERAS, self.i // CAMERAS
        self.i += 1
        frame = self.rng.integers(0, 40, (HEIGHT, WIDTH, 3), dtype=np.uint8)  # a dark road
        for y, x in _car_positions(camera, index):
            frame[y : y + 12, x : x + 16] = 220  # a bright car
        ctx.set_partition_key("camera", f"cam-{camera}")
        return {
            "camera": f"cam-{camera}",
            "index": index,
            "jpeg": zlib.compress(frame.tobytes(), 1),  # stands in for a real codec
        }


class Decode(ProcessorNode):
    def process(self, packet: dict[str, Any]) -> dict[str, Any]:
        pixels = np.frombuffer(zlib.decompress(packet["jpeg"]), np.uint8)
        return {
            "camera": packet["camera"],
            "index": packet["index"],
            "frame": pixels.reshape(HEIGHT, WIDTH, 3),
        }


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class Detector(ProcessorNode):
    """Bright blobs in a 4×4-box-filtered, 2×2-max-pooled brightness map."""

    THRESHOLD = 150.0

    def open(self, ctx: Any) -> None:
        torch = _torch()
        self.backend = "numpy"
        if torch is not None:
            torch.set_num_threads(1)  # one process per replica already
            # ctx.device is "cuda" when the executor gave this replica a GPU
            device = "cuda" if ctx.device == "cuda" and torch.cuda.is_available() else "cpu"
            conv = torch.nn.Conv2d(1, 1, kernel_size=4, stride=4, bias=False)
            with torch.no_grad():
                conv.weight.fill_(1.0 / 16)
            self.model = torch.nn.Sequential(conv, torch.nn.MaxPool2d(2)).to(device).eval()
            self.device = device
            self.backend = f"torch-{device}"
        if ctx.replica == 0:
            ctx.logger.info("detector running on %s", self.backend)

    def heatmap(self, gray: np.ndarray) -> np.ndarray:
        if self.backend == "numpy":
            boxed = gray.reshape(HEIGHT // 4, 4, WIDTH // 4, 4).mean(axis=(1, 3))
            h, w = boxed.shape
            return boxed.reshape(h // 2, 2, w // 2, 2).max(axis=(1, 3))
        import torch

        with torch.no_grad():
            x = torch.from_numpy(gray).to(self.device)[None, None]
            return self.model(x)[0, 0].cpu().numpy()

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        gray = item["frame"].mean(axis=2, dtype=np.float32)
        heat = self.heatmap(gray)
        boxes = []
        for cy, cx in zip(*np.nonzero(heat > self.THRESHOLD), strict=True):
            y, x = int(cy) * 8, int(cx) * 8  # one heat cell = 8×8 pixels
            boxes.append([y, x, y + 8, x + 8])
        return {**item, "boxes": _merge(boxes), "backend": self.backend}


def _merge(boxes: list[list[int]]) -> list[list[int]]:
    """Union touching cells into one box per car."""
    merged: list[list[int]] = []
    for box in sorted(boxes):
        for m in merged:
            if box[0] <= m[2] and box[1] <= m[3] and box[2] >= m[0] and box[3] >= m[1]:
                m[:] = [min(m[0], box[0]), min(m[1], box[1]), max(m[2], box[2]), max(m[3], box[3])]
                break
        else:
            merged.append(list(box))
    return merged


class Tracker(OneTaskProcessorNode):
    """Stable track ids per camera: nearest previous box within 24 pixels."""

    def open(self) -> None:
        self.tracks: dict[str, dict[int, tuple[float, float]]] = {}
        self.next_id = 0

    def process(self, item: dict[str, Any], ctx: Any) -> dict[str, Any]:
        camera = ctx.metadata["camera"]
        known = self.tracks.setdefault(camera, {})
        now: dict[int, tuple[float, float]] = {}
        out = []
        for box in item["boxes"]:
            centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
            best = min(
                (t for t in known if t not in now),
                key=lambda t: _dist(known[t], centre),
                default=None,
            )
            if best is None or _dist(known[best], centre) > 24:
                best = self.next_id = self.next_id + 1
            now[best] = centre
            out.append({"track": f"{camera}/{best}", "box": box})
        self.tracks[camera] = now
        return {"camera": camera, "index": item["index"], "vehicles": out}


def _dist(a: tuple[float, float], b: tuple[float, float]) -> float:
    return float(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5)


class Pose(ProcessorNode):
    """Four keypoints per car from an 8×8 crop, by a fixed random two-layer network."""

    def open(self, ctx: Any) -> None:
        rng = np.random.default_rng(11)
        self.w1 = rng.normal(0, 0.1, (64, 16)).astype(np.float32)
        self.w2 = rng.normal(0, 0.1, (16, 8)).astype(np.float32)
        torch = _torch()
        self.torch = None
        if torch is not None:
            torch.set_num_threads(1)
            self.torch = torch
            self.device = "cuda" if ctx.device == "cuda" and torch.cuda.is_available() else "cpu"
            self.tw1 = torch.from_numpy(self.w1).to(self.device)
            self.tw2 = torch.from_numpy(self.w2).to(self.device)

    def process(self, item: dict[str, Any]) -> list[list[float]]:
        gray = item["frame"].mean(axis=2, dtype=np.float32) / 255.0
        crops = []
        for y0, x0, y1, x1 in item["boxes"]:
            crop = gray[y0:y1, x0:x1]
            ys = np.linspace(0, crop.shape[0] - 1, 8).astype(int)
            xs = np.linspace(0, crop.shape[1] - 1, 8).astype(int)
            crops.append(crop[np.ix_(ys, xs)].reshape(64))
        if not crops:
            return []
        batch = np.stack(crops)
        if self.torch is None:
            out = np.tanh(np.maximum(batch @ self.w1, 0) @ self.w2)
        else:
            t = self.torch
            x = t.from_numpy(batch).to(self.device)
            out = t.tanh(t.relu(x @ self.tw1) @ self.tw2).cpu().numpy()
        keypoints = []
        for (y0, x0, y1, x1), k in zip(item["boxes"], out, strict=True):
            h, w = y1 - y0, x1 - x0
            keypoints.append(
                [round(float(y0 + h * (0.5 + k[2 * j] / 2)), 1) for j in range(4)]
                + [round(float(x0 + w * (0.5 + k[2 * j + 1] / 2)), 1) for j in range(4)]
            )
        return keypoints


class Fuse(ProcessorNode):
    """One event per frame: tracked vehicles with their keypoints."""

    def process(self, tracked: dict[str, Any], keypoints: list[list[float]], ctx: Any) -> Any:
        vehicles = [
            {**v, "keypoints": k} for v, k in zip(tracked["vehicles"], keypoints, strict=True)
        ]
        return {
            "trace_id": ctx.trace_id,
            "camera": tracked["camera"],
            "frame": tracked["index"],
            "vehicles": vehicles,
            "fused_by": ctx.replica,
        }


class Events(ConsumerNode):
    """JSON lines, one per frame, to $TRAFFIC_EVENTS (default <temp dir>/vf-traffic/events.jsonl)."""

    def open(self, ctx: Any) -> None:
        self.path = os.environ.get("TRAFFIC_EVENTS") or os.path.join(
            tempfile.gettempdir(), "vf-traffic", "events.jsonl"
        )
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
        self.count = 0
        ctx.logger.info("writing one JSON line per frame to %s", self.path)

    def consume(self, event: dict[str, Any], ctx: Any) -> None:
        self.file.write(json.dumps(event) + "\n")
        self.count += 1

    def close(self) -> None:
        self.file.close()


def build(name: str = "traffic") -> Flow:
    cameras = Cameras(name="cameras", sets_keys=["camera"])
    decode = Decode(name="decode", nb_tasks=2)(cameras)
    detector = Detector(name="detector", nb_tasks=2, device_type="gpu")(decode)
    tracker = Tracker(name="tracker", nb_tasks=2, partition_by="camera")(detector)
    pose = Pose(name="pose", device_type="gpu", gpu_memory_gib=2)(detector)
    fuse = Fuse(name="fuse", nb_tasks=2, partition_by="trace_id")(tracker, pose)
    events = Events(name="events")(fuse)
    return Flow([events], flow_type=BATCH, name=name)


flow = build()
