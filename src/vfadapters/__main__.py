"""``python -m vfadapters``: the ``vf`` command, as the console script runs it."""

from vfadapters.entry import run

run()
