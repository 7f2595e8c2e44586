"""The alert wait behind the check_alerts role (manifestation gate, baseline and recovery quiet)."""

import importlib.util
import sys
from typing import Any

from orchestrator import paths

_path = paths.ROLES_DIR / "check_alerts" / "library" / "opsbench_alerts_wait.py"
_spec = importlib.util.spec_from_file_location("opsbench_alerts_wait", _path)
assert _spec and _spec.loader
_mod = importlib.util.module_from_spec(_spec)
sys.modules["opsbench_alerts_wait"] = _mod
_spec.loader.exec_module(_mod)
match = _mod.matches

ACTIVE = [{"alertname": "ServiceDown", "service": "cart", "instance_id": "cart-1"},
          {"alertname": "ServiceErrorRateHigh", "service": "frontend"}]
DOWN = {"alertname": "ServiceDown", "service": "cart"}


def test_every_expected_alert_must_be_active() -> None:
    assert match(ACTIVE, [{"alertname": "ServiceDown", "service": "cart"}], False)
    assert match(ACTIVE, [{"alertname": "ServiceDown"}, {"alertname": "ServiceErrorRateHigh"}], False)
    assert not match(ACTIVE, [{"alertname": "ServiceDown", "service": "frontend"}], False)
    assert not match(ACTIVE, [{"alertname": "ServiceDown"}, {"alertname": "RedisDown"}], False)
    assert not match([], [{"alertname": "ServiceDown"}], False)


def test_quiet_means_no_active_alert_except_ignored() -> None:
    assert match([], [], True)
    assert not match(ACTIVE, [], True)
    assert not match(ACTIVE, [], True, ["ServiceDown"])
    assert match(ACTIVE, [], True, ["ServiceDown", "ServiceErrorRateHigh"])


class Scripted:
    """A fake clock and Alertmanager: answers[i] is what the i-th query (one per second) sees."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.t, self.calls = answers, 0.0, 0

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds

    def query(self, _url: str) -> Any:
        i = min(self.calls, len(self.answers) - 1)
        self.calls += 1
        return self.answers[i]


def run(answers: list[Any], *, firing: list[dict[str, Any]] | None = None, hold: float = 0,
        timeout: float = 60, ignore: list[str] | None = None) -> dict[str, Any]:
    s = Scripted(answers)
    return _mod.wait("http://am", firing or [], firing is None, ignore or [], hold, 1, timeout,
                     clock=s.clock, sleep=s.sleep, query=s.query)


def test_quiet_hold_restarts_when_an_alert_starts_after_a_first_quiet_answer() -> None:
    # The CI failure: quiet at first (the alert's `for:` not elapsed yet), then an error burst
    # from a dependency still starting, then quiet for good. The check waits the burst out.
    answers = [[], [], ACTIVE, ACTIVE, ACTIVE] + [[]] * 10
    result = run(answers, hold=5)
    assert result["ok"] and result["waited_s"] == 10.0


def test_quiet_hold_fails_when_alerts_never_stay_away_long_enough() -> None:
    flapping = [[], [], [], ACTIVE] * 30
    result = run(flapping, hold=5, timeout=40)
    assert not result["ok"]
    assert "never quiet for 5s" in result["detail"] and "ServiceDown" in result["detail"]


def test_unanswered_queries_neither_break_nor_complete_the_hold() -> None:
    assert run([[], None, None, [], [], [], []], hold=5)["waited_s"] == 5.0
    never = run([None], hold=5, timeout=10)
    assert not never["ok"] and "never answered" in never["detail"]


def test_ignored_alerts_do_not_break_quiet() -> None:
    assert run([ACTIVE], hold=3, ignore=["ServiceDown", "ServiceErrorRateHigh"])["ok"]


def test_firing_waits_for_every_matcher_and_names_the_missing_ones() -> None:
    ok = run([[], [], [ACTIVE[1]], ACTIVE], firing=[DOWN])
    assert ok["ok"] and ok["waited_s"] == 3.0 and ok["missing"] == []
    late = run([[ACTIVE[1]]], firing=[DOWN, {"alertname": "ServiceErrorRateHigh"}], timeout=5)
    assert not late["ok"] and late["missing"] == [DOWN] and "did not fire within 5s" in late["detail"]


def test_quiet_success_reports_when_the_quiet_window_began() -> None:
    s = Scripted([ACTIVE, ACTIVE, [], [], [], []])
    result = _mod.wait("http://am", [], True, [], 3, 1, 60, clock=s.clock, sleep=s.sleep, query=s.query,
                       wall=lambda: 1000.0 + s.t)
    assert result["ok"] and result["quiet_since_epoch"] == 1002.0
