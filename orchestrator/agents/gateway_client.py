"""What every baseline agent shares to reach the run's tool gateway: the call interface, its error, the REST client.

An agent is written against ``call(tool, **args) -> result`` raising ``ToolError``; the REST client here and the
MCP client (``mcp_client``) both implement it, so agents switch transport without change. ``open_session`` is every
agent's start: the run's manifest, the gateway's address and token, where the output goes.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

Call = Callable[..., Any]


class ToolError(RuntimeError):
    """A tool call the gateway refused or could not answer (its message names the tool)."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"{tool}: {message}")


class GatewayClient:
    """The run's tool gateway over REST: ``POST {url}/v1/tools/{name}`` with a bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/"), token
        self.next_page: str | None = None  # of the last call: pass as ``page`` for the next one

    def __call__(self, tool: str, **args: Any) -> Any:
        req = urllib.request.Request(
            f"{self.url}/v1/tools/{tool}", data=json.dumps(args).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if not body.get("ok"):
            raise ToolError(tool, (body.get("error") or {}).get("message", "no reason given"))
        self.next_page = body.get("next_page")
        return body.get("result")


@dataclass(frozen=True)
class Session:
    """What an agent is handed: the manifest, the gateway (REST url, MCP url, bearer token) and its output file."""

    manifest: dict[str, Any]
    url: str
    mcp_url: str | None
    token: str
    output: Path

    def write(self, output: Mapping[str, Any]) -> None:
        """The agent's answer, where the manifest (or $OPSBENCH_OUTPUT) says."""
        self.output.write_text(json.dumps(output, indent=2))


def _setup_error(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    raise SystemExit(2)


def open_session(environ: Mapping[str, str] = os.environ) -> Session:
    """The run's manifest ($OPSBENCH_MANIFEST) and its gateway; exits 2 naming what is missing (an agent started
    outside `opsbench run`, or for a run whose manifest names no tool gateway)."""
    manifest_file = environ.get("OPSBENCH_MANIFEST")
    if not manifest_file:
        _setup_error("OPSBENCH_MANIFEST is not set: run the agent through `opsbench run` or `opsbench campaign`")
    manifest = json.loads(Path(manifest_file).read_text())
    gateway = manifest.get("tools") or {}
    if not gateway.get("url"):
        _setup_error(f"the manifest {manifest_file} names no tool gateway (manifest.tools.url)")
    return Session(manifest=manifest, url=gateway["url"], mcp_url=gateway.get("mcp_url"),
                   token=Path(manifest["token_file"]).read_text().strip(),
                   output=Path(environ.get("OPSBENCH_OUTPUT") or manifest["output"]["path"]))
