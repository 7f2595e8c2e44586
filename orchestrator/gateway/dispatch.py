"""One dispatch path for every call, whichever transport it came by (REST or MCP).

Order of checks: budget (calls, deadline) -> tool known -> tool in the run's profile -> arguments valid -> the
handler (which applies the scope rules and talks to the backends). Every call, whatever its outcome, is appended to
the trajectory before the answer goes out, so budgets, scope and the record cannot differ between transports.

Every call that reaches the gateway counts against `max_calls`, including refused and invalid ones (the agent spent
a turn on it); calls refused because the budget is exhausted are recorded but not counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .context import RunContext
from .errors import HTTP_STATUS, TRAJECTORY_STATUS, ToolError
from .tools import BY_NAME, Tool, profile_tools
from .trajectory import AnswerLog, TrajectoryLog, redact

log = logging.getLogger("opsbench.gateway")

Transport = Literal["rest", "mcp"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    result: Any = None
    next_page: str | None = None
    error: ToolError | None = None

    def body(self) -> dict[str, Any]:
        """The answer both transports send: {ok, result, next_page} or {ok, error: {code, message[, field]}}."""
        if self.ok:
            return {"ok": True, "result": self.result, "next_page": self.next_page}
        assert self.error is not None
        return {"ok": False, "error": self.error.to_dict()}

    @property
    def http_status(self) -> int:
        return 200 if self.ok or self.error is None else HTTP_STATUS[self.error.code]


def _validation_error(exc: ValidationError) -> ToolError:
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append((field, err["msg"]))
    first = problems[0][0] if problems else "arguments"
    message = "; ".join(f"{f}: {m}" for f, m in problems)
    return ToolError("invalid", message, field=first)


class Gateway:
    """The tools of one run, with its profile, budgets and trajectory."""

    def __init__(self, ctx: RunContext, trajectory: TrajectoryLog | None = None) -> None:
        self.ctx = ctx
        self.tools = [t for t in profile_tools(ctx.options.profile)
                      if t.family not in ctx.options.hidden_families and ctx.evidence.offers(t)]
        self._visible = {t.name: t for t in self.tools}
        self.trajectory = trajectory or TrajectoryLog(ctx.gateway_dir / "trajectory.jsonl")
        self.answers = AnswerLog(self.trajectory.path.with_name("answers.jsonl"))
        self._calls = 0
        self._lock = threading.Lock()

    def budget(self) -> dict[str, Any]:
        opts = self.ctx.options
        return {"max_calls": opts.max_calls, "calls": self._calls, "deadline": opts.deadline}

    def _charge(self) -> None:
        """Count this call, or refuse it when a budget is spent."""
        opts = self.ctx.options
        if opts.deadline is not None and self.ctx.clock() >= opts.deadline:
            raise ToolError("budget_exhausted", f"the run's deadline ({opts.deadline:.0f}, Unix time) has passed; "
                            "no more tool calls are accepted")
        with self._lock:
            if opts.max_calls is not None and self._calls >= opts.max_calls:
                raise ToolError("budget_exhausted", f"the run's budget of {opts.max_calls} tool calls is spent")
            self._calls += 1

    def _tool(self, name: str) -> Tool[Any]:
        tool = self._visible.get(name)
        if tool is not None:
            return tool
        if name in BY_NAME:
            why = None if self.ctx.evidence.offers(BY_NAME[name]) else self.ctx.evidence.refusal(BY_NAME[name])
            if why:
                raise ToolError("denied", why)
            raise ToolError("denied", f"tool {name!r} is not available in this run (profile "
                            f"{self.ctx.options.profile!r})")
        raise ToolError("not_found", f"no tool {name!r}; tools: {', '.join(self._visible)}")

    @staticmethod
    def _validate(tool: Tool[Any], args: Any) -> BaseModel:
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ToolError("invalid", f"arguments: must be a JSON object, not {type(args).__name__}",
                            field="arguments")
        try:
            parsed: BaseModel = tool.args.model_validate(args)
        except ValidationError as exc:
            raise _validation_error(exc) from None
        return parsed

    def call(self, name: str, args: Any, transport: Transport = "rest", body_error: ToolError | None = None
             ) -> Outcome:
        """Run one tool call end to end and record it. Never raises for a failed call: the Outcome says why.

        `body_error`: the transport could not decode the arguments (e.g. malformed JSON); the call is counted,
        checked and recorded like any other, then refused with that error."""
        ts = self.ctx.clock()
        started = time.monotonic()
        tool: Tool[Any] | None = None
        try:
            self._charge()
            tool = self._tool(name)
            if body_error is not None:
                raise body_error
            parsed = self._validate(tool, args)
            produced = tool.run(self.ctx, parsed)
            outcome = Outcome(True, produced.result, produced.next_page)
        except ToolError as exc:
            outcome = Outcome(False, error=exc)
        except Exception as exc:  # a bug or an unexpected backend failure: the agent gets an answer anyway
            log.exception("tool %s failed", name)
            outcome = Outcome(False, error=ToolError("backend_error", f"{exc.__class__.__name__}: {exc}"))
        if outcome.error is not None and outcome.error.code in ("denied", "budget_exhausted"):
            log.warning("denied %s call to %s: %s", transport, name, outcome.error.message)
        self._record(name, args, tool, outcome, ts, time.monotonic() - started, transport)
        return outcome

    def _record(self, name: str, args: Any, tool: Tool[Any] | None, outcome: Outcome, ts: float, elapsed: float,
                transport: Transport) -> None:
        token = self.ctx.current_token()
        answer = json.dumps(outcome.body(), default=str)
        record: dict[str, Any] = {
            "ts": ts,
            "tool": name or "(none)",
            "args": redact(args if isinstance(args, dict) else ({} if args is None else {"_value": args}), token),
            "status": "ok" if outcome.ok else TRAJECTORY_STATUS[outcome.error.code if outcome.error else "invalid"],
            "elapsed": round(max(elapsed, 0.0), 6),
            "transport": transport,
            "result_bytes": len(answer) if outcome.ok else 0,
            "result_sha256": hashlib.sha256(answer.encode()).hexdigest(),
        }
        if tool is not None:
            record["family"] = tool.family
        if outcome.error is not None:
            record["error"] = redact(outcome.error.to_dict(), token)
        try:
            self.trajectory.append(record)
            if outcome.ok:
                self.answers.keep(record["result_sha256"], answer, token)
        except OSError:
            log.exception("cannot append to the trajectory %s", self.trajectory.path)
