"""Check on a GPU machine that two GPU nodes of a local run really share one card.

    python examples/traffic/gpu_share_check.py        # needs torch with CUDA and nvidia-smi
    CUDA_VISIBLE_DEVICES=0 python examples/traffic/gpu_share_check.py   # on a multi-GPU host

Runs a flow with two GPU nodes (``gpu_memory_gib=1`` each) on the host's real
GPUs. Each replica allocates 256 MiB on ``cuda`` in ``open()`` and reports its
``CUDA_VISIBLE_DEVICES``, the card's UUID and its pid; ``nvidia-smi`` is asked
which processes hold memory on which card while both are open. It passes when
both replicas got the same ``CUDA_VISIBLE_DEVICES`` (the card the assignment
chose), see the same UUID, and nvidia-smi lists both pids on that card (when
it can see the workers' pids: inside a container it often cannot, and that
part is then skipped and said so). Exit status 0 = pass, 1 = fail, 2 = no GPU
here (nothing checked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from vfcore import BATCH, ConsumerNode, Flow, ProcessorNode, ProducerNode

OUT = os.environ.get("GPU_CHECK_OUT", os.path.join(tempfile.gettempdir(), "vf-gpu-check.jsonl"))


class Ticks(ProducerNode):
    def open(self) -> None:
        self.i = 0

    def next(self) -> int:
        if self.i >= 20:
            raise StopIteration
        self.i += 1
        time.sleep(0.1)  # keep both GPU workers alive for ~2 s
        return self.i


class OnGpu(ProcessorNode):
    def open(self, ctx) -> None:  # type: ignore[no-untyped-def]
        import torch

        self.block = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
        props = torch.cuda.get_device_properties(0)
        with open(OUT, "a") as f:
            f.write(
                json.dumps(
                    {
                        "node": self.name,
                        "pid": os.getpid(),
                        "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "device": ctx.device,
                        "uuid": str(getattr(props, "uuid", "")),
                    }
                )
                + "\n"
            )

    def process(self, x: int) -> int:
        return x


class Drop(ConsumerNode):
    def consume(self, x: int) -> None:
        pass


def build() -> Flow:
    ticks = Ticks(name="ticks")
    a = OnGpu(name="gpu_a", device_type="gpu", gpu_memory_gib=1)(ticks)
    b = OnGpu(name="gpu_b", device_type="gpu", gpu_memory_gib=1)(ticks)
    return Flow([Drop(name="drop_a")(a), Drop(name="drop_b")(b)], flow_type=BATCH)


def _apps() -> dict[int, str]:
    done = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    out = {}
    for line in done.stdout.splitlines():
        pid, uuid = (p.strip() for p in line.split(","))
        out[int(pid)] = uuid
    return out


def main() -> int:
    from vfadapters.local import RunOptions, run
    from vfadapters.local.gpus import detect_gpus

    gpus = detect_gpus()
    if not gpus:
        print("no GPU on this host: nothing to check")
        return 2
    if os.path.exists(OUT):
        os.remove(OUT)
    seen: dict[int, str] = {}

    def watch(level: int, text: str) -> None:
        print(text, file=sys.stderr)

    import threading

    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            seen.update(_apps())
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    summary = run(build(), RunOptions(progress=False, log_sink=watch))
    stop.set()
    poller.join()
    with open(OUT) as f:
        rows = [json.loads(line) for line in f]
    print(json.dumps({"gpu": summary.gpu, "replicas": rows, "nvidia_smi": seen}, indent=2))
    ok = (
        summary.status == "completed"
        and len(rows) == 2
        and rows[0]["cvd"] == rows[1]["cvd"] != ""
        and rows[0]["device"] == rows[1]["device"] == "cuda"
        and rows[0]["uuid"] == rows[1]["uuid"]
    )
    if all(r["pid"] in seen for r in rows):
        ok = ok and len({seen[r["pid"]] for r in rows}) == 1
    else:
        print("note: nvidia-smi does not list the workers' pids here; that check is skipped")
    print("PASS: two GPU nodes share one card" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
