"""A flow that fits, yet kube-scheduler strands one of its pods (docs/scheduler-model.md, worked example).

Two 2-GPU encoders and one 4-GPU model on two 4-GPU nodes: the exact packing
puts both encoders on one node and the model on the other. kube-scheduler's
default LeastAllocated scoring on cpu and memory spreads the encoders over the
two nodes (each asks for half a node's cpu), and the 4-GPU pod then finds no
node with 4 free GPUs:

    vf plan examples/stranding.py --cluster examples/clusters/two-4gpu
"""

from __future__ import annotations

from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode


class Clips(ProducerNode):
    def next(self):
        raise StopIteration


class Encode(ProcessorNode):
    def process(self, clip):
        return clip


class Segment(ProcessorNode):
    def process(self, clip):
        return clip


class Store(ConsumerNode):
    def consume(self, item):
        pass


clips = Clips(name="clips")
encode = Encode(
    name="encode",
    nb_tasks=2,
    device_type="gpu",
    gpu_count=2,
    requests={"cpu": "8", "memory": "32Gi"},
)(clips)
segment = Segment(
    name="segment",
    device_type="gpu",
    gpu_count=4,
    requests={"cpu": "16", "memory": "64Gi"},
)(encode)
flow = Flow([Store(name="store")(segment)], flow_type=BATCH, name="stranding")
