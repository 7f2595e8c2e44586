"""Critical user journeys (CUJs) in a real browser, with captures for diagnosis.

- ``journeys``: the step DSL (journeys as data) and the shop's journeys (browse, checkout, currency,
  recommendations).
- ``runner.run(base_url, out, journeys)``: drives Debian's Chromium through Playwright in a child process, with
  per-action and overall timeouts, loopback-only networking; writes the capture.
- ``capture``: the capture's layout and ``load_capture(dir) -> Capture``, the reader other code uses.
- ``python -m orchestrator.cuj run ...``: the CLI.
"""

from __future__ import annotations

from .capture import Capture, CaptureError, load_capture
from .errors import CujError
from .journeys import SHOP_JOURNEYS, Journey, Step, journeys_from, select_journeys
from .runner import DEFAULT_ACTION_TIMEOUT, DEFAULT_CHROMIUM, DEFAULT_TIMEOUT, RunResult, run

__all__ = ["DEFAULT_ACTION_TIMEOUT", "DEFAULT_CHROMIUM", "DEFAULT_TIMEOUT", "SHOP_JOURNEYS", "Capture",
           "CaptureError", "CujError", "Journey", "RunResult", "Step", "journeys_from", "load_capture", "run",
           "select_journeys"]
