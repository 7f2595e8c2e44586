"""Terminal progress for long steps: which step, which task, how long so far."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass
class Progress:
    """Receives lifecycle progress; the CLI renders it (`TerminalProgress`), harnesses prefix or collect it."""

    step_started: Callable[[str, int, int], None] = lambda step, i, n: None
    step_ended: Callable[[str, str, float, str], None] = lambda step, status, secs, detail: None
    task: Callable[[str, str], None] = lambda step, task: None
    message: Callable[[str], None] = lambda text: None


class TerminalProgress:
    """One line per step; on a TTY the line also shows the running task and a live timer."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.step = ""
        self.label = ""
        self.task = ""
        self.started = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    def as_progress(self) -> Progress:
        return Progress(self.step_started, self.step_ended, self.on_task, self.message)

    def _line(self) -> str:
        elapsed = time.monotonic() - self.started
        task = f" | {self.task[:60]}" if self.task else ""
        return f"{self.label} {elapsed:6.1f}s{task}"

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                self.stream.write("\r\033[K" + self._line())
                self.stream.flush()

    def step_started(self, step: str, index: int, total: int) -> None:
        with self._lock:
            self.step, self.task, self.started = step, "", time.monotonic()
            self.label = f"[{index:2d}/{total}] {step:<13}"
        if self.tty:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def on_task(self, step: str, task: str) -> None:
        with self._lock:
            self.task = task

    def step_ended(self, step: str, status: str, seconds: float, detail: str) -> None:
        self._stop.set()
        if self._ticker:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            prefix = "\r\033[K" if self.tty else ""
            mark = "ok" if status in ("successful", "exited") else status
            line = f"{prefix}{self.label} {seconds:6.1f}s  {mark}"
            if detail and mark != "ok":
                line += f"\n      {detail}"
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + f"!! {text}\n")
            self.stream.flush()
