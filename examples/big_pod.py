"""One 4-GPU pod on a fragmented pool: 9 GPUs are free, yet no node has 4.

vf plan examples/big_pod.py --cluster examples/clusters/fragmented
"""

from __future__ import annotations

from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode


class Source(ProducerNode):
    def next(self):
        raise StopIteration


class Train(ProcessorNode):
    def process(self, item):
        return item


class Sink(ConsumerNode):
    def consume(self, item):
        pass


train = Train(name="train", device_type="gpu", gpu_count=4)(Source(name="src"))
flow = Flow([Sink(name="sink")(train)], flow_type=BATCH, name="big")
