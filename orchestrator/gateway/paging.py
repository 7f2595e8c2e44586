"""Opaque page tokens: where the next page starts and the snapshot it belongs to.

A token carries the offset, a pinned time (so that pages of a growing log stay one consistent snapshot) and a digest
of the query's other arguments, so a token cannot silently be applied to a different query.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import invalid

PAGE_FIELD = "page"
NOT_PART_OF_QUERY = frozenset({PAGE_FIELD, "limit"})


def query_digest(args: Mapping[str, Any]) -> str:
    """A short digest of the arguments that define the query (not the page or its size)."""
    significant = {k: v for k, v in args.items() if k not in NOT_PART_OF_QUERY and v is not None}
    return hashlib.sha256(json.dumps(significant, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Cursor:
    offset: int = 0
    pin: int | None = None
    """A time (ns or s, the tool decides) fixed by the first page; later pages reuse it."""

    def encode(self, args: Mapping[str, Any]) -> str:
        raw = json.dumps({"o": self.offset, "p": self.pin, "q": query_digest(args)}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(token: str | None, args: Mapping[str, Any]) -> Cursor:
    """The cursor of `token` (the first page when None); `invalid` when it is malformed or from another query."""
    if token is None:
        return Cursor()
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        offset, pin, digest = int(data["o"]), data.get("p"), str(data["q"])
    except (ValueError, KeyError, TypeError) as exc:
        raise invalid(PAGE_FIELD, f"not a page token from this gateway ({exc.__class__.__name__})") from None
    if offset < 0 or (pin is not None and not isinstance(pin, int)):
        raise invalid(PAGE_FIELD, "not a page token from this gateway")
    if digest != query_digest(args):
        raise invalid(PAGE_FIELD, "this page token belongs to a different query; repeat the same arguments "
                      "with only `page` changed")
    return Cursor(offset=offset, pin=pin)


def page_of(items: list[Any], cursor: Cursor, limit: int, args: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """One page of an in-memory list: the result body and the next token (None when this is the last page)."""
    chunk = items[cursor.offset:cursor.offset + limit]
    end = cursor.offset + len(chunk)
    next_page = Cursor(end, cursor.pin).encode(args) if end < len(items) else None
    return {"items": chunk, "total": len(items), "offset": cursor.offset, "returned": len(chunk)}, next_page
