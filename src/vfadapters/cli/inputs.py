"""What the commands read the same way: the FLOW argument and the GPU options."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any


def add_gpu_options(p: argparse.ArgumentParser) -> None:
    """``--gpu-mode`` and ``--gpu-resource-name``, as ``vf explain`` and ``vf plan`` take them."""
    p.add_argument(
        "--gpu-mode",
        choices=("exclusive", "shared", "mix"),
        default="exclusive",
        help="how GPU pods take GPUs (default: exclusive)",
    )
    p.add_argument(
        "--gpu-resource-name",
        metavar="R",
        default=None,
        help="deploy-wide GPU resource (default: nvidia.com/gpu)",
    )


def load_spec(target: str) -> Any:
    """The FlowSpec of ``flow.py``, ``flow.py:factory`` or ``spec.json``.

    A flow without a name is named after its file.
    """
    from vfadapters.loading import load_flow, split_target
    from vfcore import FlowSpec

    loaded = load_flow(target)
    if isinstance(loaded, FlowSpec):
        return loaded
    spec = loaded.spec()
    if loaded.name is None:
        spec = replace(spec, name=split_target(target)[0].stem)
    return spec
