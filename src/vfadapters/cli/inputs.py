"""What the commands read the same way: the FLOW argument, the GPU options, bounded numbers."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

#: Upper bounds of the time options (seconds), each command's own (docs/cli.md, Limits).
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def check_seconds(
    value: float,
    flag: str,
    *,
    most: float,
    zero: bool = False,
    example: str,
    rule: str = "invalid-option",
) -> float:
    """``value`` when it is a finite number of seconds in ``(0, most]`` (``[0, most]``
    with ``zero``); else ``rule`` (exit 2) naming the flag and the range.

    ``nan`` and ``inf`` parse as floats but wait for ever (or never): they are refused.

    >>> check_seconds(30.0, "--wait", most=3600, zero=True, example="30")
    30.0
    """
    from vfcore import InvalidInputError

    low_ok = value >= 0 if zero else value > 0
    if not (math.isfinite(value) and low_ok and value <= most):
        raise InvalidInputError(
            rule,
            f"{flag} {value!r} must be a number of seconds {'>= 0' if zero else '> 0'} and "
            f"<= {most:,.0f}",
            f"e.g. {flag} {example}",
        )
    return value


def check_count(value: int, flag: str, *, least: int, most: int, example: str) -> int:
    """``value`` when ``least <= value <= most``; else ``invalid-option`` (exit 2)."""
    from vfcore import InvalidInputError

    if not least <= value <= most:
        raise InvalidInputError(
            "invalid-option",
            f"{flag} {value} must be a whole number >= {least:,} and <= {most:,}",
            f"e.g. {flag} {example}",
        )
    return value


def add_gpu_options(p: argparse.ArgumentParser) -> None:
    """``--gpu-mode``, ``--gpu-resource-name`` and the DRA classes, as ``vf explain``,
    ``vf plan`` and ``vf deploy`` take them."""
    p.add_argument(
        "--gpu-mode",
        choices=("exclusive", "shared", "mix", "dra"),
        default="exclusive",
        help="how GPU pods take GPUs (default: exclusive; dra: ResourceClaims, docs/dra.md)",
    )
    p.add_argument(
        "--gpu-resource-name",
        metavar="R",
        default=None,
        help="deploy-wide GPU resource (default: nvidia.com/gpu)",
    )
    p.add_argument(
        "--dra-device-class",
        metavar="CLASS",
        default="gpu.nvidia.com",
        help="with --gpu-mode dra: the DeviceClass whole-GPU claims name (default gpu.nvidia.com)",
    )
    p.add_argument(
        "--dra-mig-device-class",
        metavar="CLASS",
        default="mig.nvidia.com",
        help="with --gpu-mode dra: the DeviceClass a one-GPU node declaring gpu_memory_gib "
        "claims a MIG device of (default mig.nvidia.com; give the whole-GPU class to keep "
        "whole GPUs)",
    )


def dra_options(args: argparse.Namespace) -> dict[str, Any]:
    """The DRA keyword arguments of ``vfcore.plan``/``explain`` from the command line."""
    from vfcore.placement import check_device_class

    return {
        "dra_device_class": check_device_class(args.dra_device_class),
        "dra_mig_device_class": check_device_class(
            args.dra_mig_device_class, "--dra-mig-device-class"
        ),
    }


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
