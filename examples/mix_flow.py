"""A flow for mix mode: models that declare their VRAM share MIG-capable cards.

    vf explain examples/mix_flow.py --gpu-mode mix
    vf plan examples/mix_flow.py --cluster examples/clusters/mig-idle --gpu-mode mix
    vf plan examples/mix_flow.py --cluster examples/clusters/mig-idle --gpu-mode mix --json

Video segments are decoded on CPU; six replicas of a small detector need 9 GiB
of VRAM each (a ``1g.10gb`` slice), two replicas of an embedder 30 GiB (a
``3g.40gb``), and one re-ranker runs on two whole cards (``gpu_count=2``: a
model split across cards cannot use MIG slices). See docs/mig.md for the plan.
"""

from __future__ import annotations

from vfcore import REALTIME, ConsumerNode, Flow, ProcessorNode, ProducerNode


class Segments(ProducerNode):
    """Synthetic video segments."""

    def open(self) -> None:
        self._i = 0

    def next(self, ctx):
        if self._i >= 100:
            raise StopIteration
        self._i += 1
        return {"segment": self._i, "frames": 30}


class Decode(ProcessorNode):
    def process(self, segment):
        return {**segment, "decoded": True}


class Detect(ProcessorNode):
    def process(self, frames):
        return {**frames, "objects": frames["segment"] % 4}


class Embed(ProcessorNode):
    def process(self, detections):
        return {**detections, "embedding": [0.0] * 8}


class Rerank(ProcessorNode):
    def process(self, embedded):
        return {**embedded, "score": 1.0}


class Index(ConsumerNode):
    def open(self) -> None:
        self.count = 0

    def consume(self, item):
        self.count += 1


def build(name: str = "mix") -> Flow:
    segments = Segments(name="segments")
    decode = Decode(name="decode", nb_tasks=2, requests={"cpu": "2", "memory": "4Gi"})(segments)
    detect = Detect(
        name="detect",
        nb_tasks=6,
        device_type="gpu",
        gpu_memory_gib=9,
        requests={"cpu": "2", "memory": "8Gi"},
    )(decode)
    embed = Embed(
        name="embed",
        nb_tasks=2,
        device_type="gpu",
        gpu_memory_gib=30,
        requests={"cpu": "4", "memory": "32Gi"},
    )(detect)
    rerank = Rerank(
        name="rerank",
        device_type="gpu",
        gpu_count=2,
        requests={"cpu": "8", "memory": "64Gi"},
    )(embed)
    sink = Index(name="index")(rerank)
    return Flow([sink], flow_type=REALTIME, name=name)


flow = build()
