"""The gateway's error vocabulary: one code per way a call can fail, shared by REST, MCP and the trajectory.

Each code maps to an HTTP status (REST) and to the trajectory `status` that the process metrics read: refusals the
agent caused (`invalid`, `not_found`, `denied`, `budget_exhausted`) count as invalid actions, failures of the
environment (`not_supported`, `backend_error`) do not.
"""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal["invalid", "denied", "budget_exhausted", "not_found", "not_supported", "backend_error"]
TrajectoryStatus = Literal["ok", "error", "invalid", "denied"]

HTTP_STATUS: dict[str, int] = {
    "invalid": 422,
    "denied": 403,
    "budget_exhausted": 429,
    "not_found": 404,
    "not_supported": 501,
    "backend_error": 502,
}

TRAJECTORY_STATUS: dict[str, TrajectoryStatus] = {
    "invalid": "invalid",
    "not_found": "invalid",
    "denied": "denied",
    "budget_exhausted": "denied",
    "not_supported": "error",
    "backend_error": "error",
}


class ToolError(Exception):
    """A call that did not produce a result. `field` names the offending argument when there is one."""

    def __init__(self, code: ErrorCode, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str]:
        out = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        return out


def invalid(field: str, message: str) -> ToolError:
    return ToolError("invalid", f"{field}: {message}", field=field)


def denied(message: str, field: str | None = None) -> ToolError:
    return ToolError("denied", message, field=field)
