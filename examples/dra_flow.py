"""A flow whose GPU pods claim devices through DRA (``--gpu-mode dra``; docs/dra.md, worked example).

Four one-GPU detectors of 39, 19, 9 and 9 GiB take MIG devices
(``mig.nvidia.com``) on one H100 with DynamicMIG; a tracker takes two whole
GPUs (``gpu.nvidia.com``) on a node where a training job already holds one.
The exact plan fits them all — 3g.40gb at 4, 1g.20gb at 2, two 1g.10gb at 0 and
1 — but kube-scheduler's allocator takes the first free placement for each
claim in turn: the 19 GiB detector's 1g.20gb at 4, which leaves the last
9 GiB detector nowhere. Applied in the order of the planned devices, every
pod lands:

    vf plan examples/dra_flow.py --cluster examples/clusters/dra-h100 --gpu-mode dra
"""

from __future__ import annotations

from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode


class Frames(ProducerNode):
    def next(self):
        raise StopIteration


class Model(ProcessorNode):
    def process(self, frame):
        return frame


class Store(ConsumerNode):
    def consume(self, item):
        pass


frames = Frames(name="frames")
embed = Model(name="embed", device_type="gpu", gpu_memory_gib=39, requests={"cpu": "2"})(frames)
pose = Model(name="pose", device_type="gpu", gpu_memory_gib=19, requests={"cpu": "2"})(embed)
face = Model(name="face", device_type="gpu", gpu_memory_gib=9, requests={"cpu": "1"})(pose)
plate = Model(name="plate", device_type="gpu", gpu_memory_gib=9, requests={"cpu": "1"})(face)
track = Model(name="track", device_type="gpu", gpu_count=2, requests={"cpu": "4"})(plate)
flow = Flow([Store(name="store")(track)], flow_type=BATCH, name="dra-demo")
