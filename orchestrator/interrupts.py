"""Ctrl-C and SIGTERM during a run: a flag the steps poll instead of an exception, so clean-up always gets to run."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any


class Interrupts:
    """SIGINT/SIGTERM set a flag instead of raising, so clean-up always gets to run.

    The third signal raises KeyboardInterrupt (the run state stays on disk for
    ``opsbench cleanup``)."""

    def __init__(self, notify: Callable[[str], None]) -> None:
        self.count = 0
        self.notify = notify
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count >= 3:
            raise KeyboardInterrupt
        self.notify("interrupted: stopping, then removing faults and tearing down "
                    "(signal twice more to abandon clean-up; finish it later with `opsbench cleanup`)")

    @property
    def set(self) -> bool:
        return self.count > 0
