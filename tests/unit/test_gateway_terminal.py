"""The terminal tools (exec, read_file, write_file, list_files) against a real workspace container.

One podman container per module, from the project's base image, set up like roles/env_workspace's: no network, a
pids and a memory limit, an init, the workspace at /workspace owned by uid 1000, every call made as that user. The
gateway reads it from environment.json's `workspace`, as it would in a DevOps run.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_fixtures import NOW, TOKEN, Clock, serve_gateway, trajectory
from gateway_fixtures import ok_result as ok
from gateway_fixtures import refusal as refused

from orchestrator import paths
from orchestrator.gateway import Gateway, GatewayOptions, load_context
from orchestrator.gateway.evidence.frozen import FrozenEvidence
from orchestrator.gateway.tools.terminal import READ_CAP
from orchestrator.gateway.workspace import PodmanWorkspace, stream
from orchestrator.runner import ansible_env

IMAGE = "localhost/opsbench-base:current"
ROOT = "/workspace"
TERMINAL = {"exec", "read_file", "write_file", "list_files"}
PS = "for p in /proc/[0-9]*; do printf '%s ' \"${p#/proc/}\"; tr '\\0\\n' '  ' < $p/cmdline; echo; done"


def podman_env() -> dict[str, str]:
    return {**os.environ, **{k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}}


def podman(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, env=podman_env(), timeout=timeout,
                          check=False, cwd="/tmp")
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:2])} failed: {proc.stderr.strip()[-500:]}")
    return proc


def _usable() -> str | None:
    if not (paths.containers_conf_dir() / "containers.conf").is_file():
        return "no project containers.conf: run `make setup`"
    try:
        if podman("image", "exists", IMAGE, check=False).returncode != 0:
            return f"{IMAGE} is missing: run `make images`"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"podman is not usable: {exc}"
    return None


@pytest.fixture(scope="module")
def container() -> Iterator[str]:
    why = _usable()
    if why:
        pytest.skip(why)
    name = f"opsbench-test-ws-{uuid.uuid4().hex[:8]}"
    try:
        podman("run", "-d", "--name", name, "--network", "none", "--pids-limit", "64", "--memory", "256m", "--init",
               "--tmpfs", f"{ROOT}:rw,size=128m,mode=0755", "--label", "opsbench.test=terminal", IMAGE,
               "sleep", "infinity")
        podman("exec", "--user", "0", name, "chown", "1000:1000", ROOT)
        yield name
    finally:
        podman("rm", "--force", "--time", "0", name, check=False)


def write_run(run_dir: Path, workspace: dict[str, Any] | None) -> Path:
    (run_dir / "secrets").mkdir(parents=True, mode=0o700)
    (run_dir / "secrets" / "agent_token").write_text(TOKEN)
    environment: dict[str, Any] = {"application": "devops", "topology": {"entities": [], "edges": []}}
    if workspace is not None:
        environment["workspace"] = workspace
    (run_dir / "environment.json").write_text(json.dumps(environment))
    return run_dir


def gateway(run_dir: Path, **options: Any) -> Gateway:
    ctx = load_context(run_dir, GatewayOptions(**options))
    ctx.clock = Clock()
    return Gateway(ctx)


@pytest.fixture(scope="module")
def run_dir(container: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("ws") / "r1", {"container": container, "root": ROOT, "user": "dev",
                                                             "uid": 1000, "projects": ["app"]})


@pytest.fixture(scope="module")
def gw(run_dir: Path) -> Gateway:
    return gateway(run_dir)


def processes(gw: Gateway) -> list[str]:
    """The container's processes (pid and command line) other than its init, `sleep infinity` and this listing."""
    lines = ok(gw, "exec", command=PS)["stdout"].splitlines()
    return [line for line in lines if not any(s in line for s in ("podman-init", "sleep infinity", "opsbench-",
                                                                   "/proc/[0-9]"))]


# -- exec -------------------------------------------------------------------------------------------------------------

def test_exec_runs_as_the_unprivileged_user_in_the_workspace(gw: Gateway) -> None:
    out = ok(gw, "exec", command="id -u; pwd; echo oops >&2; exit 3")
    assert out["exit_code"] == 3 and out["timed_out"] is False
    assert out["stdout"] == f"1000\n{ROOT}\n" and out["stderr"] == "oops\n"
    assert out["truncated"] is False and out["stdout_dropped_bytes"] == 0 and 0 < out["duration_s"] < 10
    assert ok(gw, "exec", command="[[ -n bash ]] && echo $0")["stdout"] == "bash\n", "bash where there is bash"
    assert ok(gw, "exec", command="touch /etc/x")["exit_code"] != 0, "not root"
    assert ok(gw, "exec", command="getent hosts example.org || echo no-network")["stdout"].endswith("no-network\n")


def test_exec_cwd_is_a_workspace_directory(gw: Gateway) -> None:
    ok(gw, "write_file", path="proj/src/main.txt", content="x")
    assert ok(gw, "exec", command="pwd; ls", cwd="proj")["stdout"] == f"{ROOT}/proj\nsrc\n"
    assert ok(gw, "exec", command="pwd", cwd=f"{ROOT}/proj/src")["cwd"] == "proj/src"
    assert "is not a directory" in refused(gw, "exec", {"command": "pwd", "cwd": "proj/src/main.txt"}, "invalid")
    message = refused(gw, "exec", {"command": "pwd", "cwd": "../etc"}, "denied")
    assert message.startswith("cwd: '../etc'") and "outside the workspace" in message
    assert "does not exist" in refused(gw, "exec", {"command": "pwd", "cwd": "nope"}, "not_found")


def test_a_command_past_its_timeout_is_killed_with_everything_it_started(gw: Gateway) -> None:
    out = ok(gw, "exec", command="sleep 1000", timeout=2)
    assert out["timed_out"] is True and out["exit_code"] == 137 and 2 <= out["duration_s"] < 8
    assert "timeout of 2 s" in out["note"]
    # A busy loop, with helpers that left its process group (setsid) or ignore hangups (nohup).
    out = ok(gw, "exec", command="(setsid sleep 1001 &); nohup sleep 1002 >/dev/null 2>&1 & "
                                 "sh -c 'while :; do :; done'", timeout=2)
    assert out["timed_out"] is True
    assert processes(gw) == [], "nothing of the killed commands is left"
    assert ok(gw, "exec", command="echo fine")["stdout"] == "fine\n", "the workspace stays usable"


def test_a_command_never_runs_past_the_runs_deadline(run_dir: Path) -> None:
    late = gateway(run_dir, deadline=NOW + 2)  # the gateway's clock stands at NOW
    out = ok(late, "exec", command="sleep 100", timeout=600)
    assert out["timed_out"] is True and out["timeout_s"] == 2 and out["duration_s"] < 10
    assert "the run's deadline comes first" in out["note"]


def test_background_processes_are_killed_with_the_command_unless_kept(gw: Gateway) -> None:
    assert ok(gw, "exec", command="sleep 1003 & echo started")["stdout"] == "started\n"
    assert processes(gw) == []
    pid = ok(gw, "exec", command="sleep 1004 & echo $!", keep_background=True)["stdout"].strip()
    assert [p.strip() for p in processes(gw)] == [f"{pid} sleep 1004"]
    ok(gw, "exec", command=f"kill {pid}")
    assert processes(gw) == []


def test_an_output_flood_is_capped_and_says_so(gw: Gateway) -> None:
    out = ok(gw, "exec", command="yes | head -c 50M; head -c 100000 /dev/zero | tr '\\0' e >&2")
    total = 50 * 1024 * 1024
    assert out["exit_code"] == 0 and out["truncated"] is True
    assert len(out["stdout"]) == 65536 and out["stdout"].startswith("y\ny\n")
    assert (out["stdout_bytes"], out["stdout_dropped_bytes"]) == (total, total - 65536)
    assert (out["stderr_bytes"], out["stderr_dropped_bytes"], len(out["stderr"])) == (100000, 100000 - 65536, 65536)
    assert f"{total - 65536} bytes of stdout" in out["note"]
    small = ok(gw, "exec", command="seq 1 100000", max_output_bytes=1024)
    assert len(small["stdout"]) == 1024 and small["stdout_dropped_bytes"] == small["stdout_bytes"] - 1024


def test_a_command_that_never_stops_writing_is_stopped(gw: Gateway, container: str) -> None:
    """Past its caps the output is only counted; past the flood limit (256 MiB; 4 MiB here) the command is killed
    from the gateway's side, and what it started with it."""
    small = PodmanWorkspace(container, flood_limit=4 * 1024 * 1024)
    out = small.exec("yes", timeout_s=60)
    assert out["exit_code"] is None and out["timed_out"] is False and out["duration_s"] < 30
    assert out["stdout_bytes"] > 4 * 1024 * 1024 - 4096 and len(out["stdout"]) == 65536 and out["truncated"] is True
    assert "4194304 bytes of output and was killed" in out["note"]
    assert processes(gw) == []


def test_streaming_keeps_the_caps_and_stops_at_the_deadline_or_the_flood_limit() -> None:
    env = dict(os.environ)
    out = stream(["sh", "-c", "head -c 100000 /dev/zero; echo err >&2"], env, caps=(1000, 10), deadline_s=10)
    assert (out.returncode, len(out.stdout), out.stdout_total, out.stderr, out.stderr_total) == (
        0, 1000, 100000, b"err\n", 4)
    out = stream(["sleep", "30"], env, caps=(10, 10), deadline_s=0.5)
    assert out.deadline_hit and out.returncode is None and out.duration_s < 5
    out = stream(["yes"], env, caps=(10, 10), deadline_s=30, flood_limit=1_000_000)
    assert out.flooded and out.returncode is None and out.stdout_total > 1_000_000 and out.stdout == b"y\ny\ny\ny\ny\n"
    out = stream(["cat"], env, caps=(100, 10), deadline_s=10, stdin=b"fed through stdin")
    assert out.stdout == b"fed through stdin"


def test_a_fork_bomb_is_contained_and_the_workspace_stays_usable(gw: Gateway) -> None:
    # Returns at once (or hits its timeout while bash retries a fork): its children fork on, and are killed with it.
    out = ok(gw, "exec", command=":(){ :|:& };:", timeout=4)
    assert out["duration_s"] < 20
    assert processes(gw) == []
    out = ok(gw, "exec", command=":(){ :|:& };:; sleep 100", timeout=3)
    assert out["timed_out"] is True and "Resource temporarily unavailable" in out["stderr"], "the pids limit bit"
    assert processes(gw) == []
    assert ok(gw, "exec", command="echo alive")["stdout"] == "alive\n"


# -- files ------------------------------------------------------------------------------------------------------------

def test_write_read_list_round_trip(gw: Gateway) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11))
    written = ok(gw, "write_file", path="rt/deep/notes.txt", content=text)
    assert written == {"path": "rt/deep/notes.txt", "bytes_written": len(text), "size": len(text), "created": True,
                       "appended": False}
    assert ok(gw, "write_file", path="rt/deep/notes.txt", content="line 11", append=True)["size"] == len(text) + 7
    whole = ok(gw, "read_file", path="rt/deep/notes.txt")
    assert whole["content"] == text + "line 11" and whole["total_lines"] == 11 and whole["next_offset"] is None
    part = ok(gw, "read_file", path=f"{ROOT}/rt/deep/notes.txt", offset=2, limit=3)
    assert part["content"] == "line 3\nline 4\nline 5\n" and part["next_offset"] == 5 and part["truncated"] is True
    assert ok(gw, "read_file", path="rt/deep/notes.txt", unit="bytes", offset=5, limit=3)["content"] == "1\nl"
    ok(gw, "write_file", path="rt/café ü.txt", content="ünïcode")
    assert ok(gw, "read_file", path="rt/café ü.txt")["content"] == "ünïcode"
    assert "does not exist" in refused(gw, "write_file", {"path": "rt/none/x", "content": "", "create_dirs": False},
                                       "not_found")
    assert "is a directory" in refused(gw, "read_file", {"path": "rt"}, "invalid")
    assert "does not exist" in refused(gw, "read_file", {"path": "rt/missing"}, "not_found")

    listing = ok(gw, "list_files", path="rt", depth=3)
    entries = {e["path"]: e for e in listing["items"]}
    assert set(entries) == {"rt/deep", "rt/deep/notes.txt", "rt/café ü.txt"}
    assert entries["rt/deep"]["type"] == "dir" and entries["rt/deep/notes.txt"]["size"] == len(text) + 7
    assert [e["path"] for e in ok(gw, "list_files", path="rt", depth=3, glob="*.txt")["items"]] == [
        "rt/café ü.txt", "rt/deep/notes.txt"]
    assert [e["path"] for e in ok(gw, "list_files", path="rt")["items"]] == ["rt/café ü.txt", "rt/deep"]
    first = gw.call("list_files", {"path": "rt", "depth": 3, "limit": 2})
    assert first.ok and first.result["total"] == 3 and first.next_page
    assert len(ok(gw, "list_files", path="rt", depth=3, limit=2, page=first.next_page)["items"]) == 1
    assert ok(gw, "list_files", path="rt/deep/notes.txt")["items"][0]["type"] == "file"


def test_binary_and_long_files(gw: Gateway) -> None:
    ok(gw, "exec", command="mkdir -p bin && printf 'PK\\003\\004\\000\\001' > bin/a.zip && "
                           "seq 1 200000 > bin/long.txt && head -c 300000 /dev/zero | tr '\\0' a > bin/oneline")
    binary = ok(gw, "read_file", path="bin/a.zip")
    assert binary["binary"] is True and binary["content"] is None and "binary file" in binary["note"]
    assert ok(gw, "read_file", path="bin/a.zip", unit="bytes")["data_base64"] == "UEsDBAAB"
    long = ok(gw, "read_file", path="bin/long.txt")
    assert long["returned"] == 2000 and long["next_offset"] == 2000 and long["total_lines"] == 200000
    assert ok(gw, "read_file", path="bin/long.txt", offset=199998)["content"] == "199999\n200000\n"
    capped = ok(gw, "read_file", path="bin/long.txt", limit=100000)
    assert len(capped["content"]) <= READ_CAP and capped["content"].endswith("\n") and capped["truncated"] is True
    assert capped["next_offset"] == capped["returned"]
    one = ok(gw, "read_file", path="bin/oneline")
    assert len(one["content"]) == READ_CAP and "longer than" in one["note"]


def test_paths_outside_the_workspace_are_refused(gw: Gateway) -> None:
    ok(gw, "exec", command="ln -sfn /etc etc-link && ln -sfn proj inner-link && ln -sfn /nonexistent/x dangling")
    for tool, args in (("read_file", {"path": "../etc/passwd"}), ("read_file", {"path": "/etc/passwd"}),
                       ("read_file", {"path": "etc-link/passwd"}), ("list_files", {"path": "etc-link"}),
                       ("list_files", {"path": ".."}), ("write_file", {"path": "etc-link/evil", "content": "x"}),
                       ("write_file", {"path": "dangling", "content": "x"}),
                       ("exec", {"command": "ls", "cwd": "etc-link"})):
        message = refused(gw, tool, args, "denied")
        shown = str(args.get("path", args.get("cwd")))
        assert repr(shown) in message and "outside the workspace /workspace" in message, message
    assert "resolved in the workspace: /etc/passwd" in refused(gw, "read_file", {"path": "etc-link/passwd"},
                                                                 "denied")
    # A symlink inside the workspace pointing inside it is fine, and listing shows where links point.
    assert ok(gw, "list_files", path="inner-link")["path"] == "proj"
    links = {e["path"]: e for e in ok(gw, "list_files", glob="*link")["items"]}
    assert links["etc-link"] == {**links["etc-link"], "type": "symlink", "target": "/etc"}
    assert ok(gw, "exec", command="test -e /nonexistent/x || echo untouched")["stdout"] == "untouched\n"


# -- the gateway around them ------------------------------------------------------------------------------------------

def test_terminal_tools_exist_only_in_a_live_run_with_a_workspace(gw: Gateway, tmp_path: Path) -> None:
    names = {t.name for t in gw.tools}
    assert names >= TERMINAL
    assert {t.name for t in gw.tools if t.family == "terminal" and t.acts} == {"exec", "write_file"}
    assert {t.name for t in gateway(gw.ctx.run_dir, profile="observe-only").tools} & TERMINAL == {
        "read_file", "list_files"}

    plain = gateway(write_run(tmp_path / "plain", None))
    assert not TERMINAL & {t.name for t in plain.tools}
    for tool in TERMINAL:
        assert "this run has no workspace" in refused(plain, tool, {}, "denied")
    frozen = gateway(write_run(tmp_path / "frozen", None))
    frozen.ctx.evidence = FrozenEvidence("s1", tmp_path, NOW, ("alerts",))
    frozen = Gateway(frozen.ctx)
    assert not TERMINAL & {t.name for t in frozen.tools}
    assert "replays a frozen incident" in refused(frozen, "read_file", {"path": "x"}, "denied")
    assert "no workspace" in refused(frozen, "exec", {"command": "ls"}, "denied")


def test_a_vanished_container_or_root_is_a_backend_error(tmp_path: Path, container: str) -> None:
    lost = gateway(write_run(tmp_path / "lost", {"container": "opsbench-test-ws-gone", "root": ROOT, "uid": 1000}))
    assert "cannot be reached" in refused(lost, "exec", {"command": "true"}, "backend_error")
    assert trajectory(lost.ctx.run_dir)[-1]["status"] == "error"
    rootless = gateway(write_run(tmp_path / "rootless", {"container": container, "root": "/nowhere", "uid": 1000}))
    assert "'/nowhere' does not exist" in refused(rootless, "list_files", {}, "backend_error")


def test_rest_and_mcp_expose_the_terminal_and_log_every_call(run_dir: Path) -> None:
    from orchestrator.agents.mcp_client import MCPGatewayClient

    served = gateway(run_dir, max_calls=50)
    server, thread, url = serve_gateway(served)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    before = len(trajectory(run_dir))
    try:
        listed = httpx.get(f"{url}/v1/tools", headers=auth).json()["tools"]
        schema = next(t for t in listed if t["name"] == "exec")
        assert schema["family"] == "terminal" and schema["category"] == "control"
        assert schema["input_schema"]["properties"]["timeout"]["maximum"] == 600
        resp = httpx.post(f"{url}/v1/tools/exec", headers=auth, json={"command": "echo over rest"}, timeout=30)
        assert resp.status_code == 200 and resp.json()["result"]["stdout"] == "over rest\n"
        resp = httpx.post(f"{url}/v1/tools/read_file", headers=auth, json={"path": "../etc/passwd"}, timeout=30)
        assert resp.status_code == 403 and "outside the workspace" in resp.json()["error"]["message"]
        big = "z" * 5000
        with MCPGatewayClient(f"{url}/mcp", TOKEN) as call:
            assert set(call.tools) >= TERMINAL
            assert call("write_file", path="mcp/big.txt", content=big)["bytes_written"] == 5000
            assert call("exec", command="wc -c < mcp/big.txt")["stdout"].strip() == "5000"
            assert call("read_file", path="mcp/big.txt")["content"] == big
    finally:
        server.should_exit = True
        thread.join(10)
    records = trajectory(run_dir)[before:]
    assert [(r["tool"], r["status"], r["transport"], r["family"]) for r in records] == [
        ("exec", "ok", "rest", "terminal"), ("read_file", "denied", "rest", "terminal"),
        ("write_file", "ok", "mcp", "terminal"), ("exec", "ok", "mcp", "terminal"),
        ("read_file", "ok", "mcp", "terminal")]
    logged = records[2]["args"]["content"]
    assert len(logged) < 2100 and "3000 more characters not recorded" in logged, "file contents are not logged whole"
    assert "zzzz" not in json.dumps(records[4]), "a read's content is not in the trajectory (only its size and hash)"
