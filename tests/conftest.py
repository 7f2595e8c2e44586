"""Session-wide settings: the Hypothesis profiles that make the property tests repeatable or exploratory.

* ``ci`` (the default, what ``make test`` runs): derandomized. Each property test draws from a generator seeded
  by a hash of its own source, so every run executes the same cases and CI's verdict cannot depend on the draw.
  Today's example counts (tests/unit/fuzzing.py).
* ``fuzz`` (``OPSBENCH_FUZZ=1``, ``--hypothesis-profile=fuzz``, or ``make fuzz``): random exploration with
  ``OPSBENCH_FUZZ_FACTOR`` (default 10) times the cases. One seed drives every test of the session; it is printed
  in pytest's header and summary, and ``OPSBENCH_FUZZ_SEED=<seed>`` (``make fuzz SEED=<seed>``) or
  ``--hypothesis-seed=<seed>`` replays exactly that session.

The schemathesis tests draw their requests through Hypothesis (``operation.as_strategy()`` under ``@given``), so
the same profiles and seed govern them; the MCP fuzz test is plain Hypothesis (no ``random``).
"""

from __future__ import annotations

import os
import secrets

import pytest
from hypothesis import core, settings

FUZZ_PROFILE = "fuzz"
CI_PROFILE = "ci"
SEED_KEY = pytest.StashKey[int | str | None]()
# The xdist scheduler of `make test` (tests/scheduling.py says why it is ours).
pytest_plugins = ["tests.scheduling"]

settings.register_profile(CI_PROFILE, derandomize=True, database=None, print_blob=True)
settings.register_profile(FUZZ_PROFILE, derandomize=False, database=None, print_blob=True, max_examples=1000)
settings.load_profile(FUZZ_PROFILE if os.environ.get("OPSBENCH_FUZZ", "") not in ("", "0") else CI_PROFILE)


def _fuzz_seed(config: pytest.Config) -> int | str | None:
    """The seed of a fuzz session (None in the ci profile): --hypothesis-seed, OPSBENCH_FUZZ_SEED, or a new one."""
    if settings.get_current_profile_name() != FUZZ_PROFILE:
        return None
    given = config.getoption("hypothesis_seed", None) or os.environ.get("OPSBENCH_FUZZ_SEED")
    if given:
        return int(given) if str(given).isdigit() else str(given)
    return secrets.randbelow(2**32)


@pytest.hookimpl(trylast=True)  # after Hypothesis' own pytest_configure has loaded --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    seed = _fuzz_seed(config)
    config.stash[SEED_KEY] = seed
    if seed is not None:
        core.global_force_seed = seed  # what --hypothesis-seed does; derandomize=False lets it apply


def _describe(config: pytest.Config) -> str:
    seed = config.stash.get(SEED_KEY, None)
    if seed is None:
        return (f"opsbench property tests: hypothesis profile {settings.get_current_profile_name()!r}, "
                "derandomized (each test seeded from a hash of its source: the same cases every run; "
                "OPSBENCH_FUZZ=1 or `make fuzz` explores)")
    return (f"opsbench property tests: hypothesis profile {FUZZ_PROFILE!r}, seed {seed} "
            f"(replay: make fuzz SEED={seed}, or OPSBENCH_FUZZ=1 OPSBENCH_FUZZ_SEED={seed} pytest ...)")


def pytest_report_header(config: pytest.Config) -> str:
    return _describe(config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if config.stash.get(SEED_KEY, None) is not None:  # the header has scrolled away by the time a fuzz run fails
        terminalreporter.write_line(_describe(config))
