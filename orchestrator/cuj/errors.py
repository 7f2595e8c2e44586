"""The CUJ runner's user-facing error: printed as-is (no traceback), exit code 2."""

from __future__ import annotations


class CujError(Exception):
    """A problem that stops a CUJ run before or outside any journey's verdict (missing Chromium, unreachable
    base URL, unknown journey, invalid journey definition). The message names what and how to fix it."""

    exit_code = 2
