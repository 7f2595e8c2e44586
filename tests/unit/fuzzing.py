"""How many cases a property test runs: today's counts in the ``ci`` profile, more in ``fuzz`` (tests/conftest.py).

An explicit environment variable (e.g. ``OPSBENCH_FUZZ_CASES=5000``) wins in either profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

FUZZ_FACTOR = int(os.environ.get("OPSBENCH_FUZZ_FACTOR", "10"))


def fuzzing() -> bool:
    """True in the exploratory profile (OPSBENCH_FUZZ=1, --hypothesis-profile=fuzz, `make fuzz`)."""
    return settings.get_current_profile_name() == "fuzz"


def cases(env_var: str, ci_default: int) -> int:
    """The number of cases: ``$env_var`` if set, else ``ci_default`` (times FUZZ_FACTOR when fuzzing)."""
    if os.environ.get(env_var):
        return int(os.environ[env_var])
    return ci_default * FUZZ_FACTOR if fuzzing() else ci_default
