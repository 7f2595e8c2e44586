"""What every tool is made of: `Tool` (name, description, argument model, category, evidence family, handler),
`ToolResult`, the strict `Args` base model, and the helpers tool families share (time arguments, paging `now`, the
run's visible window for records).

Argument models are strict pydantic models (no coercion, no unknown fields): their JSON schema is what agents see,
and a wrong type is reported as `invalid` naming the field. Handlers take the run context and the validated arguments
and return a `ToolResult`; they raise `ToolError` for anything else. Lists that can be long are paged (`limit` +
opaque `page` token) and say how many there are in total.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .. import paging
from ..context import RunContext
from ..errors import invalid
from ..times import parse_time, to_ns

Category = Literal["observe", "control"]
Family = Literal["alerts", "metrics", "logs", "traces", "topology", "control", "billing", "cost", "changes", "browser",
                 "terminal"]


@dataclass(frozen=True)
class ToolResult:
    result: Any
    next_page: str | None = None


A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    category: Category
    family: Family
    handler: Callable[[RunContext, A], ToolResult]
    acts: bool = False
    """The tool changes the environment (live only: a frozen replay neither lists nor runs it)."""

    def input_schema(self) -> dict[str, Any]:
        """The argument model's JSON schema without pydantic's generated titles and null defaults (noise for a
        model reading it, and dropped by the OpenAPI renderer anyway)."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            if "default" in prop and prop["default"] is None:
                del prop["default"]
        return schema

    def run(self, ctx: RunContext, args: BaseModel) -> ToolResult:
        assert isinstance(args, self.args)
        return self.handler(ctx, args)


class Args(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


TimeArg = str | float
PAGE_DESCRIPTION = "The `next_page` token of the previous answer; repeat every other argument unchanged."


class NoArgs(Args):
    pass


class ServiceArgs(Args):
    service: str = Field(min_length=1, description="A service (or datastore) of the application.")


def pinned_now(ctx: RunContext, cursor: paging.Cursor) -> float:
    """The time the first page was asked for: later pages resolve `now` and relative times against it, so every
    page belongs to one snapshot."""
    return cursor.pin / 1e9 if cursor.pin is not None else ctx.now()


def visible_window(ctx: RunContext, now: float, since: TimeArg | None, until: TimeArg | None
                   ) -> tuple[int | None, int]:
    """The records' time window, clamped to the run's visible window (see `GatewayOptions.visible_since`)."""
    until_ns = to_ns(parse_time("until", until, now) if until is not None else now)
    since_ns = to_ns(parse_time("since", since, now)) if since is not None else None
    floor = ctx.options.visible_since
    if floor is not None:
        if until_ns <= to_ns(floor):
            raise invalid("until", f"before this run's window, which starts at {floor:.3f} (Unix time): earlier "
                          "records belong to another run on this environment")
        since_ns = max(since_ns or 0, to_ns(floor))
    if since_ns is not None and since_ns >= until_ns:
        raise invalid("since", "must be before until")
    return since_ns, until_ns
