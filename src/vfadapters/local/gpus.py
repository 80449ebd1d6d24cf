"""Detect the host's GPUs for a local run (nvidia-smi, else torch), as vfcore inventory.

What to do with them is :func:`vfcore.runtime.devices.assign_devices`' decision; this
module only gathers the facts. Detection never raises: a host without
``nvidia-smi`` and without ``/dev/nvidia*`` has no GPU, and torch is asked only
when device files exist but ``nvidia-smi`` does not (importing torch costs
seconds).
"""

from __future__ import annotations

import glob
import importlib.util
import shutil
import subprocess

from vfcore.runtime import GpuDevice

__all__ = ["detect_gpus", "parse_nvidia_smi"]

_QUERY = "index,uuid,name,memory.total,memory.free"


def parse_nvidia_smi(text: str) -> tuple[GpuDevice, ...]:
    """Rows of ``nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.free
    --format=csv,noheader,nounits``."""
    out: list[GpuDevice] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue

        def mib(value: str) -> int | None:
            try:
                return int(float(value))
            except ValueError:
                return None  # "[N/A]" on some boards

        out.append(
            GpuDevice(int(parts[0]), parts[1] or None, parts[2], mib(parts[3]), mib(parts[4]))
        )
    return tuple(out)


def _from_nvidia_smi() -> tuple[GpuDevice, ...] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return ()
    return parse_nvidia_smi(done.stdout)


def _from_torch() -> tuple[GpuDevice, ...]:
    if importlib.util.find_spec("torch") is None:
        return ()
    code = (
        "import torch\n"
        "if torch.cuda.is_available():\n"
        "    for i in range(torch.cuda.device_count()):\n"
        "        p = torch.cuda.get_device_properties(i)\n"
        "        print(i, p.total_memory // 2**20, p.name, sep='|')\n"
    )
    import sys

    try:
        # a child process, so that this one never initialises CUDA
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    out: list[GpuDevice] = []
    for line in done.stdout.splitlines():
        index, total, name = line.split("|", 2)
        out.append(GpuDevice(int(index), None, name, int(total), None))
    return tuple(out)


def detect_gpus() -> tuple[GpuDevice, ...]:
    """Every GPU of the host (physical indices), before ``CUDA_VISIBLE_DEVICES``."""
    found = _from_nvidia_smi()
    if found is not None:
        return found
    if not glob.glob("/dev/nvidia[0-9]*"):
        return ()
    return _from_torch()
