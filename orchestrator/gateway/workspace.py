"""The workspace backend of the terminal tools: one run's workspace container, acted on through `podman exec`.

A DevOps task's environment (roles/env_workspace) starts one container per run and publishes it in environment.json
as `workspace: {container, root, user, uid[, gid], projects}`. Every terminal call is one `podman exec` into that
container as the unprivileged user, running a small POSIX shell script (coreutils and findutils only, so any Debian
image serves; under bash where there is one, see `_BOOT`) that first resolves the path it was given *inside the
container* (`realpath`, so a symlink is judged where it lives) and refuses anything that does not lie under the
workspace root. The script answers a header line on stdout (`OPSBENCH-OK ...` or `OPSBENCH-ERR <why>`) before
anything else; the exit code and stderr of a command follow the header unchanged.

`exec` runs the command under `timeout -s KILL`, which kills the command's whole process group when the time is up;
the script then kills whatever is left that carries the call's marker variable (a process that left the group with
`setsid` or `nohup`), so the workspace stays usable. It does the same when the command returns, unless asked to
keep what it started in the background. The gateway reads the output as it streams, keeps at most the
cap of each stream and counts the rest; a command that floods more than `FLOOD_LIMIT` bytes is stopped the same
way. The gateway's own deadline (the command's timeout plus a grace) kills the `podman exec` client if the container
does not answer at all.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import selectors
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorCode, ToolError

EXEC_MARKER = "OPSBENCH_EXEC_ID"
FLOOD_LIMIT = 256 * 1024 * 1024
"""Bytes of output (both streams) after which a command is stopped: past its caps the output is only counted, but a
command that never stops writing would keep the gateway reading until its timeout."""
GRACE_S = 15.0
"""How long after a command's own timeout the gateway waits for `podman exec` before killing the client."""
SCRIPT_TIMEOUT_S = 30.0
"""The file tools' scripts (resolve, read, write, list): they do little, so this is only a backstop."""
READ_SAMPLE = 8192
"""A file is binary when its first READ_SAMPLE bytes hold a NUL byte (what git and grep decide by)."""
LINE_COUNT_MAX = 64 * 1024 * 1024
"""Files larger than this are not counted in lines (`total_lines` is None) to keep a read cheap."""

# Shared by every script: `$root` is the workspace root as the container resolves it, `resolve P` sets `$r` to P's
# real path (missing components allowed) or answers `OPSBENCH-ERR outside` when it lies outside the root.
_PRELUDE = r"""
root=$(realpath -e -- "$1" 2>/dev/null) || { printf 'OPSBENCH-ERR noroot\n%s' "$1"; exit 0; }
shift
err() { printf 'OPSBENCH-ERR %s\n%s' "$1" "$2"; exit 0; }
resolve() {
  r=$(realpath -m -- "$1" 2>/dev/null) || err unresolvable "$1"
  case "$r" in "$root"|"$root"/*) ;; *) err outside "$r" ;; esac
}
"""

_SWEEP = r"""
sweep() {
  i=0
  while [ "$i" -lt 20 ]; do
    found=$(grep -lsxzF "$EXEC_MARKER=$1" /proc/[0-9]*/environ 2>/dev/null)
    [ -n "$found" ] || break
    for f in $found; do p=${f#/proc/}; p=${p%/environ}; [ "$p" = "$$" ] || kill -9 "$p" 2>/dev/null; done
    i=$((i + 1))
  done
}
""".replace("$EXEC_MARKER", EXEC_MARKER)

# exec: cwd, timeout seconds, marker, command, keep background (0|1). `timeout` puts the command in a process group
# of its own (its pid); the group is killed at once (a builtin `kill`, no fork needed even when the pids limit is
# reached), then whatever still carries the marker.
_EXEC = _PRELUDE + _SWEEP + r"""
resolve "$1"
[ -e "$r" ] || err missing "$r"
[ -d "$r" ] || err notdir "$r"
cd "$r" 2>/dev/null || err denied "$r"
if command -v bash >/dev/null 2>&1; then shell=bash; else shell=sh; fi
printf 'OPSBENCH-OK %s %s\n' "$shell" "$r"
env OPSBENCH_EXEC_ID="$3" timeout -s KILL "$2" "$shell" -c "$4" </dev/null &
pid=$!
wait "$pid" 2>/dev/null
rc=$?
if [ "$rc" -eq 137 ] || [ "$5" = 0 ]; then
  kill -9 -- "-$pid" 2>/dev/null
  sweep "$3"
fi
exit "$rc"
"""

# sweep only: marker (the gateway's backstop after it killed a client that did not return).
_SWEEP_ONLY = _SWEEP + 'sweep "$1"\n'

# read: path, unit (lines|bytes), offset, limit, cap.
_READ = _PRELUDE + r"""
resolve "$1"
[ -e "$r" ] || err missing "$r"
[ -d "$r" ] && err isdir "$r"
[ -f "$r" ] || err notfile "$r"
[ -r "$r" ] || err denied "$r"
size=$(stat -c %s -- "$r")
bin=0
n1=$(head -c @SAMPLE@ -- "$r" | wc -c)
n2=$(head -c @SAMPLE@ -- "$r" | tr -d '\000' | wc -c)
[ "$n1" = "$n2" ] || bin=1
lines=-1
if [ "$size" -le @COUNT_MAX@ ]; then
  lines=$(wc -l < "$r")
  [ "$size" -gt 0 ] && [ "$(tail -c 1 -- "$r" | wc -l)" = 0 ] && lines=$((lines + 1))
fi
printf 'OPSBENCH-OK %s %s %s %s\n' "$size" "$bin" "$lines" "$r"
if [ "$2" = bytes ]; then
  tail -c +$(($3 + 1)) -- "$r" | head -c "$4"
elif [ "$bin" = 0 ]; then
  tail -n +$(($3 + 1)) -- "$r" | head -n "$4" | head -c $(($5 + 1))
fi
""".replace("@SAMPLE@", str(READ_SAMPLE)).replace("@COUNT_MAX@", str(LINE_COUNT_MAX))

# write: path, create_dirs (0|1), append (0|1); the content on stdin, always read to its end before the answer (podman
# exec -i can lose the output of a process that exits with its stdin still open).
_WRITE = _PRELUDE + r"""
err() { cat >/dev/null; printf 'OPSBENCH-ERR %s\n%s' "$1" "$2"; exit 0; }
resolve "$1"
[ -d "$r" ] && err isdir "$r"
parent=$(dirname -- "$r")
if [ ! -d "$parent" ]; then
  [ "$2" = 1 ] || err noparent "$parent"
  mkdir -p -- "$parent" 2>/dev/null || err denied "$parent"
  p2=$(realpath -e -- "$parent")
  case "$p2" in "$root"|"$root"/*) ;; *) err outside "$p2" ;; esac
fi
existed=0
[ -e "$r" ] && existed=1
if [ "$3" = 1 ]; then cat >> "$r" 2>/dev/null || err denied "$r"
else cat > "$r" 2>/dev/null || err denied "$r"; fi
printf 'OPSBENCH-OK %s %s %s\n' "$(stat -c %s -- "$r")" "$existed" "$r"
"""

# list: path, depth, glob ('' for none). Entries NUL-separated: type, size, mtime, link target, path.
_LIST = _PRELUDE + r"""
resolve "$1"
[ -e "$r" ] || err missing "$r"
if [ -d "$r" ]; then
  printf 'OPSBENCH-OK dir %s\n' "$r"
  if [ -n "$3" ]; then
    find "$r" -mindepth 1 -maxdepth "$2" -name "$3" -printf '%y\0%s\0%T@\0%l\0%P\0'
  else
    find "$r" -mindepth 1 -maxdepth "$2" -printf '%y\0%s\0%T@\0%l\0%P\0'
  fi
else
  printf 'OPSBENCH-OK file %s\n' "$r"
  find "$r" -maxdepth 0 -printf '%y\0%s\0%T@\0%l\0%f\0'
fi
"""

# Every script runs under bash where there is one: bash retries a fork that fails for want of a free pid (a command
# that hit the pids limit leaves killed processes being reaped for a moment), where dash gives up the whole script.
_BOOT = 's=$1; shift; command -v bash >/dev/null 2>&1 && exec bash -c "$s" "$0" "$@"; eval "$s"'
FORK_FAILURE = re.compile(r"(?i)cannot fork|fork: |resource temporarily unavailable")
"""A script that could not even start for want of a free pid; it is retried for up to FORK_RETRY_S."""
FORK_RETRY_S = 10.0

_WHY = {
    "noroot": "the workspace root {path} does not exist in the workspace container",
    "unresolvable": "cannot resolve {path} in the workspace",
    "outside": "{path} lies outside the workspace {root}; only paths inside it are allowed",
    "missing": "{path} does not exist",
    "notdir": "{path} is not a directory",
    "isdir": "{path} is a directory (list_files lists it)",
    "notfile": "{path} is not a regular file",
    "noparent": "the directory {path} does not exist (pass create_dirs: true to create it)",
    "denied": "permission denied: {path}",
}
_CODE: dict[str, ErrorCode] = {"outside": "denied", "missing": "not_found", "noparent": "not_found",
                               "noroot": "backend_error", "denied": "denied"}
_TYPES = {"f": "file", "d": "dir", "l": "symlink", "p": "fifo", "s": "socket", "c": "char_device",
          "b": "block_device"}


@dataclass
class Streamed:
    """What one podman exec produced: the kept part of each stream, how many bytes each had, why it ended."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    duration_s: float
    deadline_hit: bool = False
    flooded: bool = False


def stream(argv: Sequence[str], env: Mapping[str, str], *, caps: tuple[int, int], deadline_s: float,
           stdin: bytes | None = None, flood_limit: int = FLOOD_LIMIT, cwd: str | None = None) -> Streamed:
    """Run `argv`, keeping at most `caps` bytes of stdout and stderr (the rest is read and counted, never kept).
    At `deadline_s` seconds, or once both streams together passed `flood_limit` bytes, the process is killed."""
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    if stdin is not None:
        assert proc.stdin is not None
        pipe = proc.stdin

        def feed() -> None:
            with contextlib.suppress(OSError):
                pipe.write(stdin)
            with contextlib.suppress(OSError):
                pipe.close()

        threading.Thread(target=feed, daemon=True).start()
    kept = [bytearray(), bytearray()]
    totals = [0, 0]
    deadline_hit = flooded = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, 0)
        sel.register(proc.stderr, selectors.EVENT_READ, 1)
        while sel.get_map():
            left = deadline_s - (time.monotonic() - started)
            if left <= 0:
                deadline_hit = True
                break
            for key, _ in sel.select(timeout=min(left, 1.0)):
                index = int(key.data)
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                totals[index] += len(chunk)
                room = caps[index] - len(kept[index])
                if room > 0:
                    kept[index] += chunk[:room]
            if totals[0] + totals[1] > flood_limit:
                flooded = True
                break
    if deadline_hit or flooded:
        proc.kill()
    try:
        returncode: int | None = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        returncode = proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()
    if deadline_hit or flooded:
        returncode = None
    return Streamed(returncode, bytes(kept[0]), bytes(kept[1]), totals[0], totals[1],
                    round(time.monotonic() - started, 3), deadline_hit, flooded)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass
class PodmanWorkspace:
    """One run's workspace container (see the module docstring). Paths handed to it are workspace paths: relative
    to `root`, or absolute inside it."""

    container: str
    root: str = "/workspace"
    uid: int = 1000
    gid: int | None = None
    env: Mapping[str, str] | None = None
    """The podman environment (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF); default: the project's, as the roles use."""
    podman: str = "podman"
    flood_limit: int = FLOOD_LIMIT
    _env_cache: dict[str, str] | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_environment(cls, section: Any) -> PodmanWorkspace | None:
        """The workspace environment.json publishes (`workspace`), None when there is none."""
        if not isinstance(section, dict) or not section.get("container"):
            return None
        uid = int(section.get("uid", 1000))
        return cls(container=str(section["container"]), root=str(section.get("root") or "/workspace"), uid=uid,
                   gid=int(section["gid"]) if section.get("gid") is not None else None)

    def _environment(self) -> dict[str, str]:
        if self._env_cache is None:
            extra = dict(self.env) if self.env is not None else None
            if extra is None:
                from orchestrator.runner import ansible_env

                extra = {k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}
            self._env_cache = {**os.environ, **extra}
        return self._env_cache

    def _argv(self, script: str, args: Sequence[str], *, interactive: bool = False) -> list[str]:
        return [self.podman, "exec", *(["-i"] if interactive else []), "--user",
                f"{self.uid}:{self.gid if self.gid is not None else self.uid}", "--workdir", "/",
                self.container, "sh", "-c", _BOOT, "opsbench-terminal", script, *args]

    def _cwd(self) -> str | None:
        from .control import podman_helpers

        try:
            return str(podman_helpers().conmon_dir())
        except Exception:  # only where conmon drops its files; any directory does
            return None

    def _path(self, path: str) -> str:
        if "\x00" in path:
            raise ToolError("invalid", "path: must not contain NUL", field="path")
        if path.startswith("/"):
            return path
        return f"{self.root.rstrip('/')}/{path}" if path not in ("", ".") else self.root

    def display(self, resolved: str) -> str:
        """A resolved path as the agent names it: relative to the root ('.' for the root itself)."""
        root = self.root.rstrip("/")
        if resolved == root:
            return "."
        return resolved[len(root) + 1:] if resolved.startswith(root + "/") else resolved

    def _run(self, script: str, asked: str, args: Sequence[str], *, caps: tuple[int, int],
             deadline_s: float = SCRIPT_TIMEOUT_S, stdin: bytes | None = None, field_name: str = "path",
             retry: bool = True, flood_limit: int = FLOOD_LIMIT) -> tuple[list[str], bytes, Streamed]:
        """Run one script on the workspace path `asked` (the first script argument, resolved inside the
        container); returns the header's fields, the stdout after the header and the raw outcome. A refusal in the
        header raises the matching ToolError naming the path. A script that could not start for want of a pid is
        tried again (`retry`: it did nothing yet, or doing it twice is harmless)."""
        argv = self._argv(script, [self.root, self._path(asked), *args], interactive=stdin is not None)
        retry_until = time.monotonic() + (FORK_RETRY_S if retry else 0.0)
        delay = 0.25
        while True:
            try:
                out = stream(argv, self._environment(), caps=caps, deadline_s=deadline_s, stdin=stdin,
                             flood_limit=flood_limit, cwd=self._cwd())
            except OSError as exc:
                raise ToolError("backend_error", f"podman exec failed: {exc}") from None
            header, sep, rest = out.stdout.partition(b"\n")
            fields = _text(header).split(" ")
            started = sep and fields[0] in ("OPSBENCH-OK", "OPSBENCH-ERR")
            if started or not FORK_FAILURE.search(_text(out.stderr)) or time.monotonic() + delay > retry_until:
                break
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
        if not started:
            if FORK_FAILURE.search(_text(out.stderr)):
                raise ToolError("backend_error", f"the workspace container {self.container} cannot start a process: "
                                "its pids limit is reached (processes left running by an earlier command?)")
            if out.deadline_hit:
                raise ToolError("backend_error", f"the workspace container {self.container} did not answer within "
                                f"{deadline_s:.0f} s")
            why = _text(out.stderr).strip()[-500:] or f"exit code {out.returncode}"
            raise ToolError("backend_error", f"the workspace container {self.container} cannot be reached: {why}")
        if fields[0] == "OPSBENCH-ERR":
            why = fields[1] if len(fields) > 1 else "?"
            resolved = _text(rest)
            shown = repr(asked)
            if why == "noroot":
                shown = repr(self.root)
            elif why == "outside" and resolved != asked:
                shown += f" (resolved in the workspace: {resolved})"
            elif why in ("noparent", "notdir", "isdir", "denied") and self.display(resolved) != asked:
                shown = repr(self.display(resolved))
            message = _WHY.get(why, "{path}: " + why).format(path=shown, root=self.root)
            raise ToolError(_CODE.get(why, "invalid"), f"{field_name}: {message}", field=field_name)
        return fields[1:], rest, out

    # -- exec ----------------------------------------------------------------------------------------------------
    def exec(self, command: str, cwd: str = ".", timeout_s: int = 60, max_output: int = 65536,
             keep_background: bool = False) -> dict[str, Any]:
        """Run `command` (bash -c, or sh -c where there is no bash) in `cwd`; see the module docstring. When it
        returns, what it left running is killed too, unless `keep_background` (a server for later calls)."""
        marker = uuid.uuid4().hex
        fields, rest, out = self._run(_EXEC, cwd, [str(int(timeout_s)), marker, command,
                                                   "1" if keep_background else "0"],
                                      caps=(max_output + 8192, max_output), deadline_s=timeout_s + GRACE_S,
                                      field_name="cwd", flood_limit=self.flood_limit)
        if out.deadline_hit or out.flooded:
            self._sweep(marker)
        stdout_total = out.stdout_total - (len(out.stdout) - len(rest))  # without the script's header line
        stdout, stderr = rest[:max_output], out.stderr[:max_output]
        dropped_out, dropped_err = stdout_total - len(stdout), out.stderr_total - len(stderr)
        timed_out = out.deadline_hit or (out.returncode == 137 and out.duration_s >= timeout_s)
        result: dict[str, Any] = {
            "exit_code": out.returncode,
            "timed_out": timed_out,
            "duration_s": out.duration_s,
            "cwd": self.display(" ".join(fields[1:])),
            "shell": fields[0],
            "stdout": _text(stdout),
            "stderr": _text(stderr),
            "truncated": bool(dropped_out or dropped_err),
            "stdout_bytes": stdout_total,
            "stderr_bytes": out.stderr_total,
            "stdout_dropped_bytes": dropped_out,
            "stderr_dropped_bytes": dropped_err,
        }
        notes = []
        if timed_out:
            notes.append(f"the command ran past its timeout of {timeout_s} s and was killed (SIGKILL to its process "
                         "group and to every process it started)")
        if out.flooded:
            notes.append(f"the command wrote more than {self.flood_limit} bytes of output and was killed with "
                         "everything it started")
        if dropped_out or dropped_err:
            notes.append(f"output truncated to the first {max_output} bytes of each stream: {dropped_out} bytes of "
                         f"stdout and {dropped_err} bytes of stderr were dropped")
        if notes:
            result["note"] = "; ".join(notes)
        return result

    def _sweep(self, marker: str) -> None:
        """Kill what is left of a call whose client the gateway had to kill (best effort)."""
        with contextlib.suppress(OSError):
            stream(self._argv(_SWEEP_ONLY, [marker]), self._environment(), caps=(4096, 4096),
                   deadline_s=SCRIPT_TIMEOUT_S, cwd=self._cwd())

    # -- files ---------------------------------------------------------------------------------------------------
    def read_file(self, path: str, unit: str, offset: int, limit: int, cap: int) -> dict[str, Any]:
        """Lines [offset, offset+limit) (at most `cap` bytes, cut at a line end) or bytes [offset, offset+limit)
        (at most `cap`). A binary file is never shown as text: in bytes it comes as base64."""
        want = min(limit, cap) if unit == "bytes" else limit
        fields, rest, _ = self._run(_READ, path, [unit, str(offset), str(want), str(cap)],
                                    caps=(cap + 8192, 8192))
        size, binary, lines = int(fields[0]), fields[1] == "1", int(fields[2])
        body: dict[str, Any] = {"path": self.display(" ".join(fields[3:])), "size": size, "binary": binary,
                                "total_lines": lines if lines >= 0 and not binary else None, "unit": unit,
                                "offset": offset}
        if unit == "bytes":
            data = rest[:want]
            end = offset + len(data)
            body.update(returned=len(data), truncated=end < size, next_offset=end if end < size else None)
            if binary:
                body.update(content=None, data_base64=base64.b64encode(data).decode("ascii"),
                            note="binary file (it holds NUL bytes): the bytes are in data_base64")
            else:
                body["content"] = _text(data)
            return body
        if binary:
            body.update(content=None, returned=0, truncated=False, next_offset=None,
                        note="binary file (it holds NUL bytes): not shown as text; read it with unit: bytes "
                             "(base64) or inspect it with exec")
            return body
        data, capped, cut_line = rest, len(rest) > cap, False
        if capped:
            data = rest[:cap]
            last = data.rfind(b"\n")
            if last >= 0:
                data = data[:last + 1]
            else:
                cut_line = True
        count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        end = offset + count
        more = end < lines if lines >= 0 else (capped or count == limit)
        body.update(content=_text(data), returned=count, truncated=more, next_offset=end if more else None)
        if cut_line:
            body["note"] = (f"line {offset + 1} is longer than {cap} bytes: only its start is shown; read it with "
                            "unit: bytes")
        elif capped:
            body["note"] = f"stopped at {cap} bytes (at a line end): continue at next_offset"
        return body

    def write_file(self, path: str, content: str, create_dirs: bool, append: bool) -> dict[str, Any]:
        data = content.encode("utf-8")
        fields, _, _ = self._run(_WRITE, path, ["1" if create_dirs else "0", "1" if append else "0"],
                                 caps=(8192, 8192), stdin=data, retry=not append)
        return {"path": self.display(" ".join(fields[2:])), "bytes_written": len(data), "size": int(fields[0]),
                "created": fields[1] == "0", "appended": append}

    def list_files(self, path: str, depth: int, glob: str | None, max_bytes: int = 8 * 1024 * 1024
                   ) -> dict[str, Any]:
        fields, rest, out = self._run(_LIST, path, [str(depth), glob or ""], caps=(max_bytes, 8192))
        kind, resolved = fields[0], " ".join(fields[1:])
        parts = rest.split(b"\0")
        entries: list[dict[str, Any]] = []
        base = self.display(resolved)
        for i in range(0, len(parts) - 4, 5):
            letter, size, mtime, target, name = (_text(p) for p in parts[i:i + 5])
            rel = name if kind == "dir" else base
            if kind == "dir" and base != ".":
                rel = f"{base}/{name}"
            entry: dict[str, Any] = {"path": rel, "type": _TYPES.get(letter, "other"), "size": int(size or 0),
                                     "mtime": round(float(mtime or 0), 3)}
            if letter == "l":
                entry["target"] = target
            entries.append(entry)
        entries.sort(key=lambda e: e["path"])
        body: dict[str, Any] = {"path": base, "kind": kind, "entries": entries,
                                "incomplete": out.stdout_total > len(out.stdout)}
        errors = _text(out.stderr).strip()
        if errors:
            body["warnings"] = errors.splitlines()[:20]
        return body
