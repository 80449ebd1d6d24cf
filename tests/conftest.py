"""Test configuration: hypothesis profiles.

CI (``CI=true``) runs the laws derandomized, so a submission's result does not
depend on luck; locally each run explores new examples. No deadlines: the
machines are shared and noisy.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def _isolate_run_keys() -> None:
    """Broker runs seal their records under a run key (docs/security.md). The tests
    keep every key in a folder of their own (``VF_RUN_KEYS``), never in the user's
    key store, and give every process one key file (``VF_RUN_KEY_FILE``), as a pod
    has the one of its run's Secret — so workers started by hand join the runs
    that tests start. Tests of the key store itself unset ``VF_RUN_KEY_FILE``."""
    import atexit
    import secrets
    import shutil
    import tempfile

    if os.environ.get("VF_RUN_KEYS") and os.environ.get("VF_RUN_KEY_FILE"):
        return  # set by whoever runs the tests
    folder = tempfile.mkdtemp(prefix="vf-test-keys-")
    atexit.register(shutil.rmtree, folder, True)
    os.environ["VF_RUN_KEYS"] = os.path.join(folder, "store")
    key_file = os.path.join(folder, "run.key")
    with open(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.environ["VF_RUN_KEY_FILE"] = key_file


_isolate_run_keys()
