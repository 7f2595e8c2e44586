"""Shop feature flags: flagd file parsing, value semantics and mtime-based reload."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"))

from shop.flags import Flags, FlagValue, is_on, parse_flags


def flag(value: object, state: str = "ENABLED", default: str = "on") -> dict[str, Any]:
    return {"state": state, "variants": {"on": value, "off": False}, "defaultVariant": default}


def write(path: Path, flags: dict[str, Any], mtime_ns: int | None = None) -> None:
    path.write_text(json.dumps({"flags": flags}))
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_parse_resolves_the_default_variant_of_enabled_flags_only() -> None:
    doc = {"flags": {
        "a": flag(True),
        "b": flag(0.5),
        "c": flag(True, state="DISABLED"),
        "d": flag(True, default="off"),
        "e": {"state": "ENABLED", "variants": {"on": True}, "defaultVariant": "missing"},
        "f": {"state": "ENABLED", "defaultVariant": "on"},
        "g": flag("OLJCESPC7Z"),
        "h": flag({"nested": "object"}),
    }}
    assert parse_flags(doc) == {"a": True, "b": 0.5, "d": False, "g": "OLJCESPC7Z"}
    assert parse_flags({}) == {}
    with pytest.raises(ValueError):
        parse_flags(["not", "an", "object"])
    with pytest.raises(ValueError):
        parse_flags({"flags": []})


@pytest.mark.parametrize(("value", "on"), [
    (True, True), (False, False), (None, False), (1, True), (0, False), (0.1, True), (0.0, False),
    ("on", True), ("x", True), ("off", False), ("false", False), ("", False), ("0", False),
])
def test_is_on(value: FlagValue, on: bool) -> None:
    assert is_on(value) is on


def test_missing_file_or_flag_means_off(tmp_path: Path) -> None:
    flags = Flags(str(tmp_path / "absent.json"))
    assert flags.value("paymentServiceFailure") is None
    assert not flags.enabled("paymentServiceFailure")
    assert flags.fraction("paymentServiceFailure", 1.0) == 0.0
    assert flags.number("catalogSlowResponse", 1500) is None
    assert Flags(None).snapshot() == {}


def test_value_helpers(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    write(path, {"t": flag(True), "f": flag(False), "half": flag(0.25), "big": flag(3), "s": flag("X1"),
                 "sn": flag("0.5"), "word": flag("on"), "zero": flag(0)})
    flags = Flags(str(path))
    assert flags.fraction("t", 1.0) == 1.0 and flags.fraction("t", 0.1) == 0.1
    assert flags.fraction("half", 1.0) == 0.25
    assert flags.fraction("big", 0.1) == 1.0  # clamped
    assert flags.fraction("sn", 1.0) == 0.5
    assert flags.fraction("f", 1.0) == 0.0 and flags.fraction("zero", 1.0) == 0.0
    assert flags.number("t", 1500) == 1500 and flags.number("big", 1500) == 3.0
    assert flags.number("f", 1500) is None and flags.number("zero", 50) is None
    assert flags.text("s", "DEFAULT") == "X1"
    assert flags.text("t", "DEFAULT") == "DEFAULT" and flags.text("word", "DEFAULT") == "DEFAULT"
    assert flags.text("f", "DEFAULT") is None
    assert flags.enabled("t") and not flags.enabled("f") and flags.enabled("s")


def test_reload_on_change_at_most_once_per_interval(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    write(path, {"paymentServiceFailure": flag(1.0)}, mtime_ns=1_000_000_000)
    clock = FakeClock()
    changes: list[tuple[str, FlagValue, FlagValue]] = []
    flags = Flags(str(path), clock=clock, on_change=lambda n, o, v: changes.append((n, o, v)))
    assert flags.min_interval == 1.0
    assert flags.fraction("paymentServiceFailure", 1.0) == 1.0
    assert changes == [("paymentServiceFailure", None, 1.0)]

    write(path, {"paymentServiceFailure": flag(0.5), "adServiceFailure": flag(True)}, mtime_ns=2_000_000_000)
    clock.now += 0.5
    assert flags.value("paymentServiceFailure") == 1.0, "no re-read within the interval"
    clock.now += 0.6
    assert flags.value("paymentServiceFailure") == 0.5
    assert flags.enabled("adServiceFailure")
    assert changes[1:] == [("adServiceFailure", None, True), ("paymentServiceFailure", 1.0, 0.5)]

    clock.now += 5
    assert flags.value("paymentServiceFailure") == 0.5
    assert len(changes) == 3, "an unchanged file is not re-parsed into new changes"

    path.unlink()
    clock.now += 1.1
    assert flags.snapshot() == {}
    assert changes[3:] == [("adServiceFailure", True, None), ("paymentServiceFailure", 0.5, None)]


def test_switching_between_off_values_is_not_a_change(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    # the deployed file: every flag present and ENABLED, with its "off" variant as default
    write(path, {"a": flag(True, default="off"), "b": {"state": "ENABLED", "variants": {"on": 1.0, "off": 0},
                                                       "defaultVariant": "off"},
                 "c": {"state": "ENABLED", "variants": {"on": "X", "off": ""}, "defaultVariant": "off"}},
          mtime_ns=1_000_000_000)
    clock = FakeClock()
    changes: list[tuple[str, FlagValue, FlagValue]] = []
    flags = Flags(str(path), clock=clock, on_change=lambda n, o, v: changes.append((n, o, v)))
    assert flags.snapshot() == {"a": False, "b": 0, "c": ""} and changes == []
    write(path, {"a": flag(True, default="off"), "b": flag(1.0)}, mtime_ns=2_000_000_000)
    clock.now += 1
    assert flags.fraction("b", 0.1) == 1.0
    assert changes == [("b", 0, 1.0)]  # "c" disappearing while off is no change either


def test_same_size_rewrite_detected_by_mtime(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    write(path, {"cartServiceFailure": flag(1)}, mtime_ns=1_000_000_000)
    clock = FakeClock()
    flags = Flags(str(path), clock=clock)
    assert flags.enabled("cartServiceFailure")
    size, inode = path.stat().st_size, path.stat().st_ino
    write(path, {"cartServiceFailure": flag(0)}, mtime_ns=3_000_000_000)  # in place, same length
    assert (path.stat().st_size, path.stat().st_ino) == (size, inode)
    clock.now += 1.0
    assert not flags.enabled("cartServiceFailure")


def test_malformed_file_keeps_previous_values_until_fixed(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    write(path, {"adServiceHighCpu": flag(True)}, mtime_ns=1_000_000_000)
    clock = FakeClock()
    errors: list[str] = []
    flags = Flags(str(path), clock=clock, on_error=errors.append)
    path.write_text('{"flags": {"adServiceHighCpu": ')  # half written
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    clock.now += 1.0
    assert flags.enabled("adServiceHighCpu")
    clock.now += 1.0
    assert flags.enabled("adServiceHighCpu")
    assert len(errors) == 1 and "flags.json" in errors[0]
    write(path, {}, mtime_ns=3_000_000_000)
    clock.now += 1.0
    assert not flags.enabled("adServiceHighCpu")


def test_real_clock_reload(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    write(path, {})
    flags = Flags(str(path), min_interval=0.05)
    assert not flags.enabled("x")
    write(path, {"x": flag(True)}, mtime_ns=os.stat(path).st_mtime_ns + 1_000_000)
    time.sleep(0.06)
    assert flags.enabled("x")
