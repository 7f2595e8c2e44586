"""Feature flags in the flagd / OpenFeature file format, re-read when the file changes.

File format (FLAGS_FILE)::

    {"flags": {"paymentServiceFailure": {"state": "ENABLED",
                                         "variants": {"on": 1.0, "off": 0},
                                         "defaultVariant": "on"}}}

A flag's value is ``variants[defaultVariant]`` when its state is ENABLED; a missing file, a
missing or disabled flag, or a malformed entry means "off" (value None). The file's signature
(mtime, size, inode) is checked at most once per ``min_interval`` seconds.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping

FlagValue = bool | int | float | str | None
ChangeCallback = Callable[[str, FlagValue, FlagValue], None]
ErrorCallback = Callable[[str], None]

_OFF_STRINGS = frozenset({"", "off", "false", "0", "no", "disabled"})
_ON_STRINGS = frozenset({"on", "true", "yes", "enabled"})


def parse_flags(data: object) -> dict[str, FlagValue]:
    """Resolve every ENABLED flag of a parsed flags document to its default variant's value."""
    if not isinstance(data, Mapping):
        raise ValueError("flags document must be a JSON object")
    flags = data.get("flags", {})
    if not isinstance(flags, Mapping):
        raise ValueError("'flags' must be an object")
    resolved: dict[str, FlagValue] = {}
    for name, spec in flags.items():
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            continue
        if str(spec.get("state", "ENABLED")).upper() != "ENABLED":
            continue
        variants = spec.get("variants")
        default = spec.get("defaultVariant")
        if not isinstance(variants, Mapping) or not isinstance(default, str) or default not in variants:
            continue
        value = variants[default]
        if value is None or isinstance(value, bool | int | float | str):
            resolved[name] = value
    return resolved


def is_on(value: FlagValue) -> bool:
    """Truthiness of a resolved value: true, a non-zero number or a non-"off" string."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, int | float):
        return value != 0
    return value.strip().lower() not in _OFF_STRINGS


class Flags:
    """Thread-safe view of a flags file; reloads lazily on access when the file changed."""

    def __init__(self, path: str | None, *, min_interval: float = 1.0,
                 on_change: ChangeCallback | None = None, on_error: ErrorCallback | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path or None
        self.min_interval = min_interval
        self._on_change = on_change
        self._on_error = on_error
        self._clock = clock
        self._lock = threading.Lock()
        self._values: dict[str, FlagValue] = {}
        self._signature: tuple[int, int, int] | None = None
        self._last_check: float | None = None
        self.reload(force=True)

    # -- loading ---------------------------------------------------------------------------
    def reload(self, force: bool = False) -> None:
        """Re-read the file if it changed (or unconditionally with ``force``)."""
        with self._lock:
            now = self._clock()
            if not force and self._last_check is not None and now - self._last_check < self.min_interval:
                return
            self._last_check = now
            signature = self._stat()
            if not force and signature == self._signature:
                return
            self._signature = signature
            if signature is None:
                new_values: dict[str, FlagValue] = {}
            else:
                try:
                    assert self.path is not None
                    with open(self.path, encoding="utf-8") as fh:
                        new_values = parse_flags(json.load(fh))
                except (OSError, ValueError) as exc:
                    # Keep the previous values: a half-written file gets a new signature when completed.
                    if self._on_error is not None:
                        self._on_error(f"cannot read flags file {self.path}: {exc}")
                    return
            old_values, self._values = self._values, new_values
        if self._on_change is not None:
            for name in sorted(set(old_values) | set(new_values)):
                old, new = old_values.get(name), new_values.get(name)
                if not is_on(old) and not is_on(new):
                    continue  # off in both (absent, false, 0, ""): not a change anyone can observe
                if old != new or type(old) is not type(new):
                    self._on_change(name, old, new)

    def _stat(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    # -- reading ---------------------------------------------------------------------------
    def value(self, name: str) -> FlagValue:
        """The flag's resolved value, None when off or absent."""
        self.reload()
        return self._values.get(name)

    def snapshot(self) -> dict[str, FlagValue]:
        self.reload()
        return dict(self._values)

    def enabled(self, name: str) -> bool:
        return is_on(self.value(name))

    def fraction(self, name: str, default: float) -> float:
        """A rate in [0, 1]: ``default`` for true/non-numeric "on" values, the number itself otherwise."""
        value = self.value(name)
        if not is_on(value):
            return 0.0
        rate = default
        if isinstance(value, int | float) and not isinstance(value, bool):
            rate = float(value)
        elif isinstance(value, str):
            try:
                rate = float(value)
            except ValueError:
                rate = default
        return min(1.0, max(0.0, rate))

    def number(self, name: str, default: float) -> float | None:
        """A magnitude (ms, requests per second): None when off, ``default`` for true, else the number."""
        value = self.value(name)
        if not is_on(value):
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return default
        return default

    def text(self, name: str, default: str) -> str | None:
        """A string parameter: None when off, the string variant, or ``default`` for other "on" values."""
        value = self.value(name)
        if not is_on(value):
            return None
        if isinstance(value, str) and value.strip().lower() not in _ON_STRINGS:
            return value.strip()
        return default
