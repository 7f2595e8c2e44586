"""The terminal family: a shell and file tools inside the run's workspace container (the DevOps task domain).

A DevOps environment (roles/env_workspace) starts one workspace container per run, with the task's project tree at
its root (`/workspace`), and publishes it in environment.json (`workspace`). These tools act in it as the
workspace's unprivileged user, through `orchestrator.gateway.workspace` (one `podman exec` per call):

* `exec` runs a shell command (bash, or sh) with a timeout, after which the command and everything it started are
  killed, and caps on its output (the rest is counted, and said to be dropped);
* `read_file`, `write_file` and `list_files` take workspace paths (relative to the root, or absolute inside it);
  the container resolves them (symlinks included), and one that lies outside the workspace is refused, naming it.

`exec` and `write_file` change the workspace: they are control tools, live only. A run without a workspace (every
non-DevOps environment) and a frozen replay offer none of the four: calling one is `denied`, saying why.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from .. import paging
from ..context import RunContext
from .base import PAGE_DESCRIPTION, Args, Tool, ToolResult

EXEC_TIMEOUT_MAX = 600
OUTPUT_MAX = 1024 * 1024
READ_CAP = 256 * 1024
"""At most this many bytes of a file per read_file answer."""
WRITE_MAX = 1024 * 1024
PATH_HELP = "A workspace path: relative to the workspace root (/workspace), or absolute inside it."


class ExecArgs(Args):
    command: str = Field(min_length=1, max_length=100_000, description="The shell command (run by bash -c, or sh -c "
                         "where the workspace has no bash), as the workspace's unprivileged user.")
    cwd: str = Field(".", min_length=1, description=f"The directory to run it in. {PATH_HELP}")
    timeout: int = Field(60, ge=1, le=EXEC_TIMEOUT_MAX, description="Seconds after which the command and every "
                         "process it started are killed (SIGKILL).")
    max_output_bytes: int = Field(65536, ge=1024, le=OUTPUT_MAX, description="Keep at most this many bytes of "
                                  "stdout and of stderr each; the answer says how many more were dropped.")
    keep_background: bool = Field(False, description="Leave processes the command started in the background "
                                  "running after it returns (e.g. a server for later calls); by default they are "
                                  "killed with it.")


class ReadFileArgs(Args):
    path: str = Field(min_length=1, description=f"The file. {PATH_HELP}")
    unit: Literal["lines", "bytes"] = Field("lines", description="Whether offset and limit count lines (text) or "
                                            "bytes (any file; a binary file's bytes come base64-encoded).")
    offset: int = Field(0, ge=0, description="The first line (0-based) or byte to return.")
    limit: int | None = Field(None, ge=1, le=100_000, description=f"How many lines (default 2000) or bytes "
                              f"(default and at most {READ_CAP}); a text answer stops at {READ_CAP} bytes anyway, at "
                              "a line end.")


class WriteFileArgs(Args):
    path: str = Field(min_length=1, description=f"The file to write (created or replaced). {PATH_HELP}")
    content: str = Field(max_length=WRITE_MAX, description="The whole new content (UTF-8 text).")
    create_dirs: bool = Field(True, description="Create missing parent directories.")
    append: bool = Field(False, description="Append to the file instead of replacing it.")


class ListFilesArgs(Args):
    path: str = Field(".", min_length=1, description=f"The directory (or one file). {PATH_HELP}")
    depth: int = Field(1, ge=1, le=10, description="How deep to list (1: the directory's own entries).")
    glob: str | None = Field(None, min_length=1, max_length=200, description="Only entries whose name matches this "
                             "shell pattern (e.g. `*.yaml`); directories are still descended.")
    limit: int = Field(200, ge=1, le=1000, description="Entries per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def exec_command(ctx: RunContext, args: ExecArgs) -> ToolResult:
    """Run the command; its timeout never reaches past the run's deadline (a call accepted just before it cannot
    keep working for ten more minutes)."""
    workspace = ctx.evidence.require_workspace()
    timeout = args.timeout
    if ctx.options.deadline is not None:
        timeout = max(1, min(timeout, math.ceil(ctx.options.deadline - ctx.clock())))
    result = workspace.exec(args.command, args.cwd, timeout, args.max_output_bytes, args.keep_background)
    if timeout < args.timeout:
        result["timeout_s"] = timeout
        note = f"the timeout was cut to {timeout} s: the run's deadline comes first"
        result["note"] = f"{result['note']}; {note}" if result.get("note") else note
    return ToolResult(result)


def read_file(ctx: RunContext, args: ReadFileArgs) -> ToolResult:
    workspace = ctx.evidence.require_workspace()
    limit = args.limit if args.limit is not None else (2000 if args.unit == "lines" else READ_CAP)
    return ToolResult(workspace.read_file(args.path, args.unit, args.offset, limit, READ_CAP))


def write_file(ctx: RunContext, args: WriteFileArgs) -> ToolResult:
    workspace = ctx.evidence.require_workspace()
    return ToolResult(workspace.write_file(args.path, args.content, args.create_dirs, args.append))


def list_files(ctx: RunContext, args: ListFilesArgs) -> ToolResult:
    workspace = ctx.evidence.require_workspace()
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    listing = workspace.list_files(args.path, args.depth, args.glob)
    body, next_page = paging.page_of(listing.pop("entries"), cursor, args.limit, query)
    answer: dict[str, Any] = {**listing, **body}
    if answer.pop("incomplete", False):
        answer["note"] = "the listing was too long to read whole: list a subdirectory or use a smaller depth"
    return ToolResult(answer, next_page)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("list_files", "List a workspace directory (or one file): each entry's path (relative to the workspace "
         "root), type (file, dir, symlink with its target, ...), size and mtime, down to `depth`, optionally only "
         "names matching a glob. Paged.", ListFilesArgs, "observe", "terminal", list_files),
    Tool("read_file", "Read a file of the workspace: a range of lines (text) or of bytes (base64 for a binary "
         "file), with its size, total lines and the next offset while more remain.", ReadFileArgs, "observe",
         "terminal", read_file),
    Tool("write_file", "Write a file of the workspace (replace or append; parent directories created by default); "
         "answers the bytes written and the file's size.", WriteFileArgs, "control", "terminal", write_file,
         acts=True),
    Tool("exec", "Run a shell command in the workspace container (no network) as its unprivileged user: exit code, "
         "stdout, stderr (each capped, with the bytes dropped), duration and whether it timed out. A command that "
         "runs past its timeout is killed with everything it started.", ExecArgs, "control", "terminal",
         exec_command, acts=True),
)
