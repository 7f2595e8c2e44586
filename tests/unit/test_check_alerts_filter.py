"""The alert-matching filter behind the check_alerts role (the manifestation gate)."""

import importlib.util

from orchestrator import paths

_spec = importlib.util.spec_from_file_location(
    "opsbench_alerts", paths.ROLES_DIR / "check_alerts" / "filter_plugins" / "opsbench_alerts.py")
assert _spec and _spec.loader
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
match = _mod.opsbench_alerts_match

ACTIVE = [{"alertname": "ServiceDown", "service": "cart", "instance_id": "cart-1"},
          {"alertname": "ServiceErrorRateHigh", "service": "frontend"}]


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
