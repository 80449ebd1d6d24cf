"""Imported first by the fork server: it dies with the process that started it.

multiprocessing's fork server exits when every holder of its "alive" pipe has
closed it — and each worker it forks holds that pipe. After a ``kill -9`` of the
coordinator the fork server would wait for its workers, and the workers (whose
parent-death signal names the fork server) for it: all of them would run on,
orphaned, for ever. Imported by the fork server while it preloads (see
:func:`vfadapters.runtime.forkserver.install_forkserver`), this module asks the
kernel to kill the fork server when its parent, the coordinator, dies
(``PR_SET_PDEATHSIG``, Linux); the workers' own parent-death signal then takes
them too.

It acts only in the process the coordinator named: ``VF_FORKSERVER_OF`` holds the
coordinator's pid and this process must be its child; imported anywhere else it
does nothing.
"""

from __future__ import annotations

import os

from vfadapters.runtime.forkserver import ENV
from vfadapters.runtime.worker import set_parent_death_signal


def guard() -> bool:
    """Arm the parent-death signal if this is the named coordinator's fork server."""
    owner = os.environ.get(ENV, "")
    if not owner.isdigit() or os.getppid() != int(owner):
        return False
    set_parent_death_signal()
    if os.getppid() != int(owner):  # the coordinator died before the line above
        os._exit(1)
    return True


guard()
