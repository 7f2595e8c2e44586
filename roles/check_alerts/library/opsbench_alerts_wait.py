#!/usr/bin/python
"""Wait until Alertmanager shows the expected alerts, or shows none for a continuous hold window."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: opsbench_alerts_wait
short_description: Wait for an expected alert state in Alertmanager
description:
  - With C(firing), polls until every matcher (a dict of labels) equals the labels of at least
    one active alert on every key it gives.
  - With C(quiet), polls until no active alert (other than C(ignore)) has been seen for
    C(hold) consecutive seconds. An alert seen during the window restarts it, so an error burst
    that starts after a first quiet answer (a dependency still starting) is waited out rather
    than failing the check; an unanswered query neither breaks nor extends the window.
  - Fails after C(timeout) seconds, naming the alerts last seen or the matchers still missing.
options:
  url: {type: str, required: true, description: Alertmanager base URL.}
  firing: {type: list, elements: dict, default: [], description: Label matchers that must all be active.}
  quiet: {type: bool, default: false, description: Require no active alert instead.}
  ignore: {type: list, elements: str, default: [], description: Alert names that quiet does not count.}
  hold: {type: float, default: 0, description: Seconds the quiet state must hold without interruption.}
  interval: {type: float, default: 1, description: Seconds between queries.}
  timeout: {type: float, default: 60, description: Seconds before giving up.}
"""

RETURN = r"""
ok: {description: Whether the expected state was reached, type: bool, returned: always}
waited_s: {description: Seconds from the start to success or timeout, type: float, returned: always}
active: {description: Label sets of the alerts active at the last answered query, type: list, returned: always}
missing: {description: Matchers not satisfied at the end (firing mode), type: list, returned: always}
quiet_since_epoch: {description: Unix time the successful quiet window began, type: float, returned: quiet success}
detail: {description: Why the check failed, type: str, returned: on failure}
"""


def matches(active: list[dict[str, Any]], firing: list[dict[str, Any]], quiet: bool,
            ignore: list[str] | tuple[str, ...] = ()) -> bool:
    """With quiet: no active alert other than the ignored names. Otherwise: every matcher in
    ``firing`` equals the labels of at least one active alert on every key it gives."""
    if quiet:
        return not counted(active, ignore)
    return not missing(active, firing)


def counted(active: list[dict[str, Any]], ignore: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    """The active alerts that a quiet check counts."""
    return [a for a in active if a.get("alertname") not in set(ignore)]


def missing(active: list[dict[str, Any]], firing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The matchers no active alert satisfies."""
    return [m for m in firing if not any(all(a.get(k) == v for k, v in m.items()) for a in active)]


def active_alerts(url: str) -> list[dict[str, Any]] | None:
    """Label sets of the active, unsilenced, uninhibited alerts; None when Alertmanager does not answer."""
    query = f"{url.rstrip('/')}/api/v2/alerts?active=true&silenced=false&inhibited=false"
    try:
        with urllib.request.urlopen(query, timeout=5) as resp:  # noqa: S310 - a run-local http URL
            return [a.get("labels", {}) for a in json.loads(resp.read())]
    except (OSError, ValueError, urllib.error.URLError):
        return None


def wait(url: str, firing: list[dict[str, Any]], quiet: bool, ignore: list[str], hold: float,
         interval: float, timeout: float, clock: Any = time.monotonic, sleep: Any = time.sleep,
         query: Any = active_alerts, wall: Any = time.time) -> dict[str, Any]:
    """Poll until the expected state holds (see DOCUMENTATION); return the module's result."""
    start = clock()
    last: list[dict[str, Any]] = []
    last_alerting: list[dict[str, Any]] = []
    quiet_since: float | None = None
    answered = False
    while True:
        now = clock()
        active = query(url)
        if active is not None:
            answered, last = True, active
            if quiet:
                if counted(active, ignore):
                    quiet_since, last_alerting = None, counted(active, ignore)
                elif quiet_since is None:
                    quiet_since = now
                if quiet_since is not None and now - quiet_since >= hold:
                    # Wall-clock time the quiet window began (MTTR is measured up to it).
                    since_epoch = round(wall() - (clock() - quiet_since), 3)
                    return {"ok": True, "waited_s": round(now - start, 1), "active": active, "missing": [],
                            "quiet_since_epoch": since_epoch}
            elif not missing(active, firing):
                return {"ok": True, "waited_s": round(now - start, 1), "active": active, "missing": []}
        if now - start >= timeout:
            break
        sleep(interval)
    result = {"ok": False, "waited_s": round(clock() - start, 1), "active": last,
              "missing": [] if quiet else missing(last, firing)}
    if not answered:
        result["detail"] = f"Alertmanager at {url} never answered within {timeout:g}s"
    elif quiet:
        names = ", ".join(sorted({a.get("alertname", "?") for a in last_alerting}))
        result["detail"] = (f"alerts active within {timeout:g}s, never quiet for {hold:g}s in a row"
                            f" (last seen: {names})")
    else:
        result["detail"] = (f"expected alerts {json.dumps(result['missing'])} did not fire within "
                            f"{timeout:g}s")
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "firing": {"type": "list", "elements": "dict", "default": []},
            "quiet": {"type": "bool", "default": False},
            "ignore": {"type": "list", "elements": "str", "default": []},
            "hold": {"type": "float", "default": 0},
            "interval": {"type": "float", "default": 1},
            "timeout": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    p = module.params
    if bool(p["firing"]) == p["quiet"]:
        module.fail_json(msg="give exactly one of firing (non-empty) or quiet: true")
    result = wait(p["url"], p["firing"], p["quiet"], p["ignore"], p["hold"], p["interval"], p["timeout"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
