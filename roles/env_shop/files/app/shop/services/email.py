"""email: POST /send {email, order} renders an order confirmation; nothing is sent anywhere.

With EMAIL_SPOOL_DIR set, each confirmation is also written to ``<dir>/<order_id>-<timestamp>.html``
before answering, and only the newest EMAIL_SPOOL_KEEP (default 200) ``*.html`` files are kept. A failed
write (a full disk) answers 500 with the OS error; /healthz stays 200.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..web import App, HTTPError, Request

EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,255}$")
UNSAFE_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")
SPOOL_KEEP_DEFAULT = 200


def render(email: str, order: Mapping[str, Any]) -> str:
    lines = [f"<p>Dear customer ({html.escape(email)}),</p>",
             f"<p>thank you for your order {html.escape(str(order.get('order_id', '')))}.</p>", "<ul>"]
    for item in order.get("items", []) or []:
        if isinstance(item, Mapping):
            lines.append(f"<li>{html.escape(str(item.get('quantity', 1)))} x "
                         f"{html.escape(str(item.get('name', item.get('product_id', ''))))}</li>")
    lines.append("</ul>")
    total = order.get("total") or {}
    if isinstance(total, Mapping):
        lines.append(f"<p>Total: {html.escape(str(total.get('amount', '')))} "
                     f"{html.escape(str(total.get('currency', '')))}</p>")
    lines.append(f"<p>Tracking number: {html.escape(str(order.get('tracking_id', '')))}</p>")
    return "\n".join(lines)


class Spool:
    """A directory of rendered confirmations that keeps only the newest ``keep`` files."""

    def __init__(self, directory: str, keep: int = SPOOL_KEEP_DEFAULT) -> None:
        self.directory = directory
        self.keep = max(1, keep)
        self._prune_lock = threading.Lock()

    @staticmethod
    def file_name(order_id: object) -> str:
        """``<order id or a uuid>-<UTC timestamp with ns>.html``; the id keeps only [A-Za-z0-9_-]."""
        key = UNSAFE_NAME_RE.sub("_", str(order_id or "")).strip("_")[:64] or uuid.uuid4().hex
        ns = time.time_ns()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ns // 1_000_000_000))
        return f"{key}-{stamp}.{ns % 1_000_000_000:09d}Z.html"

    def write(self, order_id: object, text: str) -> str:
        """Write to a temporary name, rename into place, prune; returns the file's path. Raises OSError."""
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, self.file_name(order_id))
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.directory)
        try:
            try:
                os.fchmod(fd, 0o644)  # mkstemp creates 0600
                data = text.encode()
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.prune()
        return path

    def prune(self) -> int:
        """Delete the oldest ``*.html`` files beyond ``keep``; returns how many were deleted."""
        with self._prune_lock:
            entries = []
            with os.scandir(self.directory) as it:
                for entry in it:
                    if entry.name.endswith(".html") and not entry.name.startswith(".") and entry.is_file():
                        try:
                            entries.append((entry.stat().st_mtime_ns, entry.name.rsplit("-", 1)[-1], entry.path))
                        except FileNotFoundError:
                            continue  # removed by another replica sharing the directory
            entries.sort()
            deleted = 0
            for *_, path in entries[:max(0, len(entries) - self.keep)]:
                try:
                    os.unlink(path)
                    deleted += 1
                except FileNotFoundError:
                    pass
            return deleted


def build(app: App, env: Mapping[str, str]) -> None:
    spool_dir = env.get("EMAIL_SPOOL_DIR") or None
    spool = Spool(spool_dir, int(env.get("EMAIL_SPOOL_KEEP") or SPOOL_KEEP_DEFAULT)) if spool_dir else None

    @app.route("POST", "/send")
    def send(req: Request) -> dict[str, Any]:
        body = req.json()
        email = body.get("email")
        if not isinstance(email, str) or not EMAIL_RE.match(email):
            raise HTTPError(400, "invalid email address")
        order = body.get("order") or {}
        if not isinstance(order, Mapping):
            raise HTTPError(400, "order must be an object")
        text = render(email, order)
        attrs: dict[str, Any] = {"email.bytes": len(text)}
        if spool is not None:
            try:
                attrs["email.spool_file"] = spool.write(order.get("order_id"), text)
            except OSError as exc:
                # The request's ERROR log line and span carry this message (web.App.handle logs every 5xx).
                raise HTTPError(500, f"cannot spool confirmation: {exc}") from None
        app.log.info(f"order confirmation rendered for order {order.get('order_id', '?')}", **attrs)
        return {"status": "rendered", "bytes": len(text)}
