"""``python -m vfadapters.cli``: the ``vf`` command."""

from vfadapters.cli import run

run()
