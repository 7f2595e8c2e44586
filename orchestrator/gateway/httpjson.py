"""GET a JSON document from the run's Prometheus or Alertmanager and turn failures into tool errors.

Prometheus answers a bad query with 400/422 and `{"status": "error", "error": "..."}`: that is the agent's mistake
(`invalid`, naming the argument), while an unreachable or failing server is the environment's (`backend_error`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from .errors import ToolError

TIMEOUT = 30.0


def get_json(base_url: str, path: str, params: Mapping[str, str] | None = None, *, what: str,
             query_field: str | None = None, timeout: float = TIMEOUT) -> Any:
    """The decoded JSON answer of `GET base_url + path?params`."""
    url = base_url.rstrip("/") + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc)
        if exc.code in (400, 422) and query_field is not None:
            raise ToolError("invalid", f"{query_field}: {what} rejected it: {detail}", field=query_field) from None
        raise ToolError("backend_error", f"{what} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolError("backend_error", f"{what} at {base_url} is unreachable: {reason}") from None
    except ValueError as exc:
        raise ToolError("backend_error", f"{what} answered something that is not JSON: {exc}") from None


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read().decode(errors="replace")
    except OSError:
        return exc.reason if isinstance(exc.reason, str) else str(exc)
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500] or str(exc.reason)
    if isinstance(data, dict) and data.get("error"):
        kind = data.get("errorType")
        return f"{kind}: {data['error']}" if kind else str(data["error"])
    return body.strip()[:500]


def post_json(base_url: str, path: str, *, what: str, timeout: float = TIMEOUT) -> None:
    """POST with an empty body (e.g. Prometheus's `/-/reload`); failures become `backend_error`."""
    request = urllib.request.Request(base_url.rstrip("/") + path, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise ToolError("backend_error", f"{what} answered HTTP {exc.code}: {_error_detail(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolError("backend_error", f"{what} at {base_url} is unreachable: {reason}") from None
