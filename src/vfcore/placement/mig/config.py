"""mig-parted configs: the YAML a plan's reconfigured nodes are given, and their config names."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["config_name", "mig_parted_yaml"]


def mig_parted_yaml(config: Mapping[str, Any]) -> str:
    """A mig-parted config (as :meth:`MigPlan.mig_parted_config` returns it) as YAML text.

    Deterministic: configs, entries and profiles in the order given; every
    name double-quoted (a JSON string is a valid YAML scalar).
    """
    configs = config.get("mig-configs") or {}
    lines = [f"version: {config.get('version', 'v1')}", "mig-configs:" + ("" if configs else " {}")]
    for name, entries in configs.items():
        lines.append(f"  {json.dumps(name)}:")
        for entry in entries:
            devices = entry["devices"]
            shown = (
                json.dumps(devices)
                if isinstance(devices, str)
                else ("[" + ", ".join(str(d) for d in devices) + "]")
            )
            lines.append(f"    - devices: {shown}")
            lines.append(f"      mig-enabled: {'true' if entry['mig-enabled'] else 'false'}")
            if "mig-devices" in entry:
                lines.append("      mig-devices:" + ("" if entry["mig-devices"] else " {}"))
                for profile, count in entry["mig-devices"].items():
                    lines.append(f"        {json.dumps(profile)}: {count}")
    return "\n".join(lines) + "\n"


_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


def config_name(node: str) -> str:
    """The mig-parted config name for a node, usable as the ``nvidia.com/mig.config`` label value.

    >>> config_name("gpu-a")
    'vfcore-gpu-a'
    """
    name = f"vfcore-{node}"
    if len(name) <= 63 and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", node)[: 63 - len("vfcore--") - 10]
    readable = readable.strip("-_.")
    return f"vfcore-{readable}-{digest}" if readable else f"vfcore-{digest}"
