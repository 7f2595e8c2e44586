"""The command agent sandbox (orchestrator/sandbox/): what it hides, what it keeps, who the agent is, what it
reaches on the network, and how it fails.

These run the real sandbox (unshare: mount, pid and network namespaces, setpriv, slirp4netns, nft; no podman);
the isolation audit (test_isolation_audit.py) tries the forbidden things through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orchestrator import agent, paths, sandbox


@pytest.fixture
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    monkeypatch.delenv("OPSBENCH_AGENT_SANDBOX", raising=False)
    (home / "runs" / "r1" / "secrets").mkdir(parents=True)
    (home / "runs" / "r1" / "secrets" / "agent_token").write_text("tok")
    (home / "runs" / "r1" / "secrets" / "db_password").write_text("pw")
    d = home / "runs" / "r1" / "agent"
    (d / "workspace").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"token_file": str(home / "runs/r1/secrets/agent_token")}))
    return d


def run(agent_dir: Path, command: str, budget: int = 30) -> agent.AgentResult:
    return agent.run_agent(command, agent_dir, {}, budget, lambda: False, lambda pid: None)


def test_plan_hides_the_project_and_state_and_keeps_what_an_agent_needs(agent_dir: Path) -> None:
    plan = sandbox.plan(agent_dir)
    private = [p for p, _ in plan.private]
    # Hidden, or inside a private (empty) directory: a checkout or state dir under /tmp is covered by its tmpfs.
    for hidden in (paths.PROJECT_ROOT, paths.state_dir()):
        assert any(d == hidden or d in hidden.parents for d in plan.hide + private), (hidden, plan)
    kept = {k.target: k.how for k in plan.keep}
    assert kept[paths.PROJECT_ROOT / "orchestrator"] == "ro" and kept[agent_dir.resolve()] == "rw"
    assert kept[agent_dir.parent / "secrets" / "agent_token"] == "ro"  # named by the manifest
    assert agent_dir.parent / "secrets" / "db_password" not in kept


def test_an_agent_sees_its_workspace_manifest_and_token_and_nothing_else_of_the_run(agent_dir: Path) -> None:
    secrets = agent_dir.parent / "secrets"
    result = run(agent_dir, f"cat ../manifest.json > seen.txt; cat {secrets}/agent_token >> seen.txt; "
                            f"cat {secrets}/db_password >> seen.txt; echo out > {agent_dir}/output.json; "
                            f"echo x > {secrets}/agent_token")
    assert result.status == "crashed" and result.isolation["sandbox"] == "namespaces", result
    seen = (agent_dir / "workspace" / "seen.txt").read_text()
    assert "token_file" in seen and "tok" in seen and "pw" not in seen
    assert (agent_dir / "output.json").read_text() == "out\n"  # its own directory is writable
    assert (secrets / "agent_token").read_text() == "tok"  # the token is read-only
    assert "Read-only file system" in (agent_dir / "stderr.log").read_text()


def test_processes_the_agent_leaves_behind_die_with_it(agent_dir: Path) -> None:
    """Even a daemon in its own session: the pid namespace ends when the agent does."""
    result = run(agent_dir, "setsid sleep 300 > /dev/null 2>&1 & echo started")
    assert result.status == "exited", result
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True, check=False).stdout.split()
    mine = [p for p in left if Path(f"/proc/{p}/cwd").exists()
            and os.readlink(f"/proc/{p}/cwd").startswith(str(agent_dir))]
    assert mine == [], "a process of the agent outlived it"


def test_an_agent_over_budget_is_stopped_with_everything_it_started(agent_dir: Path) -> None:
    start = time.monotonic()
    result = run(agent_dir, "setsid sleep 300 & sleep 300", budget=1)
    assert result.status == "timeout", result
    assert time.monotonic() - start < 60  # generous: only guards against waiting out the sleeps


def test_off_runs_the_agent_without_a_sandbox_and_says_so(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "off")
    result = run(agent_dir, f"cat {paths.SPECS_DIR}/loopweb-web-down/ground_truth.yaml > seen.txt")
    assert result.status == "exited" and result.isolation == {"sandbox": "none",
                                                              "reason": "OPSBENCH_AGENT_SANDBOX=off"}
    assert "rootCause" in (agent_dir / "workspace" / "seen.txt").read_text()


def test_require_refuses_to_run_an_agent_unsandboxed(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "require")
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "user namespaces are not allowed here (test)")
    result = run(agent_dir, "touch ran")
    assert result.status == "not_started" and "user namespaces are not allowed here" in result.detail
    assert "OPSBENCH_AGENT_SANDBOX=require" in result.detail and not (agent_dir / "workspace" / "ran").exists()
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "auto")  # auto: runs, and the record says it was not sandboxed
    result = run(agent_dir, "touch ran")
    assert result.status == "exited" and result.isolation["sandbox"] == "none"
    assert result.isolation["reason"].startswith("user namespaces")


def test_a_bad_mode_is_named(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "maybe")
    result = run(agent_dir, "true")
    assert result.status == "not_started" and "OPSBENCH_AGENT_SANDBOX='maybe'" in result.detail


def test_a_sandbox_that_cannot_be_set_up_is_ours_not_the_agents(agent_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    broken = sandbox.plan(agent_dir)
    broken.mask.append(Path("/nonexistent/key"))  # the mount fails
    monkeypatch.setattr(sandbox, "plan", lambda *a, **k: broken)
    result = run(agent_dir, "touch ran")
    assert result.status == "not_started" and "sandbox could not be set up" in result.detail, result
    assert not (agent_dir / "workspace" / "ran").exists()


def test_a_scenario_outside_the_project_is_masked(agent_dir: Path, tmp_path: Path) -> None:
    """`opsbench run path/to/scenario_dir`: the lifecycle passes the spec and ground truth as secret files."""
    spec_dir = tmp_path / "my-scenario"
    spec_dir.mkdir()
    (spec_dir / "scenario.yaml").write_text("id: mine\n")
    (spec_dir / "ground_truth.yaml").write_text("rootCause: web\n")
    result = agent.run_agent(f"cat {spec_dir}/scenario.yaml {spec_dir}/ground_truth.yaml > seen.txt", agent_dir, {},
                             30, lambda: False, lambda pid: None,
                             secret_files=[spec_dir / "scenario.yaml", spec_dir / "ground_truth.yaml"])
    assert result.status in ("exited", "crashed"), result  # masked, or (here, under /tmp) not there at all
    assert (agent_dir / "workspace" / "seen.txt").read_text() == ""


def test_the_program_the_command_runs_is_visible_and_nothing_else_it_names(agent_dir: Path) -> None:
    """`python3 /project/tests/e2e/agents/x.py`: the operator chose to run that file, so the agent sees it
    (read-only); files the command merely mentions stay hidden, and a spec file is never unmasked."""
    script = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "ciso_bad.py"
    truth = paths.SPECS_DIR / "loopweb-web-down" / "ground_truth.yaml"
    assert sandbox.program_path(f"python3 -u {script} hang") == str(script)
    assert sandbox.program_path(f"cat {truth}") is None and sandbox.program_path("python3 -m mod") is None
    plan = sandbox.plan(agent_dir, {}, [truth], f"python3 {script} --spec={truth} hang")
    assert sandbox.Keep(script, "ro") in plan.keep and all(k.target != truth for k in plan.keep)
    assert all(k.target != truth for k in sandbox.plan(agent_dir, {}, [truth], f"python3 {truth}").keep)
    reader = agent_dir.parent / "reader.sh"
    reader.write_text(f"head -c 100 {script} > seen.txt; cat {truth} {paths.PROJECT_ROOT}/README.md >> seen.txt\n")
    result = run(agent_dir, f"sh {reader}")  # the script itself is under the hidden state dir: shown as the program
    seen = (agent_dir / "workspace" / "seen.txt").read_text()
    assert result.status == "crashed" and seen == "", (result, seen)  # `script` is not the program here
    assert "rootCause" not in seen and "# OpsBench" not in seen


def test_a_missing_file_says_what_the_sandbox_hides(agent_dir: Path) -> None:
    result = run(agent_dir, f"cat {paths.PROJECT_ROOT}/pyproject.toml")
    assert result.status == "crashed" and "OPSBENCH_AGENT_VISIBLE" in result.detail, result.detail


# -- containment (issue 19): who the agent is, what it can write, what it reaches -------------------------------------
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="dropping to the agent user needs OpsBench to run as root; "
                                "unprivileged, the agent keeps the invoking uid in a nested user namespace")


def _field(text: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(name + ":"))


@needs_root
def test_the_agent_runs_as_the_agent_user_with_no_capability(agent_dir: Path) -> None:
    result = run(agent_dir, "id -u > seen.txt; id -g >> seen.txt; cat /proc/self/status >> seen.txt")
    assert result.status == "exited", result
    seen = (agent_dir / "workspace" / "seen.txt").read_text()
    name, uid, gid = sandbox.agent_user()
    assert seen.splitlines()[:2] == [str(uid), str(gid)] and uid != 0
    assert all(_field(seen, cap) == "0000000000000000" for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
    assert _field(seen, "NoNewPrivs") == "1"
    assert result.isolation["user"] == {"name": name, "uid": uid, "gid": gid, "capabilities": [],
                                        "no_new_privs": True}


def test_the_host_is_read_only_and_tmp_and_home_are_private(agent_dir: Path) -> None:
    planted = Path(tempfile.gettempdir()) / f"opsbench-planted-{os.getpid()}"
    planted.write_text("host tmp")
    base = Path(sys.base_prefix).resolve() / "lib"
    venv = Path(sys.prefix).resolve()
    mine = f"opsbench-agent-wrote-{os.getpid()}"
    try:
        result = run(agent_dir, f"ls -a /tmp ~ > seen.txt; touch /etc/{mine} {base}/{mine} {venv}/{mine} "
                                f"/usr/{mine}; echo scratch > /tmp/{mine} && echo home > ~/{mine} && "
                                f"echo /var/tmp > /var/tmp/{mine} && cat /tmp/{mine} ~/{mine} >> seen.txt")
        seen = (agent_dir / "workspace" / "seen.txt").read_text()
        stderr = (agent_dir / "stderr.log").read_text()
        assert result.status == "exited", (result, stderr)  # the last command (the private dirs) worked
        assert planted.name not in seen and "scratch\nhome\n" in seen
        for target in ("/etc", base, venv, "/usr"):
            assert f"touch: cannot touch '{target}/{mine}'" in stderr, stderr
            assert not (Path(target) / mine).exists()
        for private in (Path(tempfile.gettempdir()), Path.home(), Path("/var/tmp")):
            assert not (private / mine).exists()
        assert result.isolation["readonly"] is True
        assert {"/tmp", "/var/tmp", "/dev/shm", str(Path.home())} <= set(result.isolation["private"])
    finally:
        planted.unlink()


def test_homes_and_the_container_storage_are_hidden(agent_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "storage.conf"
    conf.write_text('[storage]\ndriver = "overlay"\ngraphroot = "/srv/g"\nrunroot = "/run/r"\n')
    assert [Path("/srv/g"), Path("/run/r")] == sandbox.storage_dirs({"CONTAINERS_STORAGE_CONF": str(conf)})[:2]
    plan = sandbox.plan(agent_dir)
    covered = plan.hide + [p for p, _ in plan.private]
    for path in [*sandbox.storage_dirs(), Path("/home"), Path("/root"), Path.home(), Path("/var/lib/opsbench")]:
        if path.exists():
            assert any(path == d or d in path.parents for d in covered), path
    result = run(agent_dir, f"ls -A /home /root {' '.join(map(str, sandbox.storage_dirs()))} > seen.txt 2>&1")
    assert result.status in ("exited", "crashed"), result
    listing = (agent_dir / "workspace" / "seen.txt").read_text()
    # Only the way to a kept path (the Python the venv was made from may live in /root/.pyenv) shows.
    ways = {part for k in plan.keep for part in k.target.parts}
    assert all(line.endswith(":") or "No such file" in line or not line or line in ways
               for line in listing.splitlines()), listing


class Server:
    """An HTTP server on the host's loopback, answering 200 with its name."""

    def __init__(self, name: str) -> None:
        import http.server
        import threading

        body = name.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


FETCH = """import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print(url, urllib.request.urlopen(url, timeout=3).read().decode())
    except OSError as exc:
        print(url, "refused", type(exc).__name__)
"""


def _netns_mounted(name: str) -> bool:
    """Whether /run/netns/`name` is mounted in the host's mount namespace (as `ip netns add` mounts it)."""
    return any(" nsfs " in line and line.split()[4] == f"/run/netns/{name}"
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


needs_net = pytest.mark.skipif(sandbox.network.unavailable_reason() != "", reason="slirp4netns/nft not installed")


@needs_net
def test_the_agent_reaches_its_gateway_and_nothing_else_on_the_host(agent_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    gateway, other, llm = Server("gateway"), Server("other"), Server("llm")
    manifest = agent_dir / "manifest.json"
    data = {**json.loads(manifest.read_text()), "tools": {"url": f"http://127.0.0.1:{gateway.port}"}}
    manifest.write_text(json.dumps(data))
    host_ip = next(n.split("/")[0] for n in sandbox.network.host_networks()
                   if n.endswith("/32") and not n.startswith("127."))
    monkeypatch.setenv("OPSBENCH_AGENT_ALLOW", f"127.0.0.1:{llm.port}")
    (agent_dir / "workspace" / "fetch.py").write_text(FETCH)
    # slirp4netns --enable-sandbox in the host's mount namespace unmounts every netns under /run/netns
    # (containers/libpod#4113): a netns of our own must survive the agent's network. (Counting all netns mounts
    # would measure the other worker's podman containers coming and going.)
    sentinel = f"opsbench-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", sentinel], check=True, capture_output=True)
    assert _netns_mounted(sentinel)
    try:
        result = agent.run_agent(
            "python3 -c 'import json,os; print(json.load(open(os.environ[\"OPSBENCH_MANIFEST\"]))[\"tools\"][\"url\"])'"
            f" > seen.txt; python3 fetch.py \"$(cat seen.txt)\" http://10.0.2.2:{other.port} "
            f"http://127.0.0.1:{gateway.port} http://{host_ip}:{gateway.port} \"$OPSBENCH_LLM_BASE_URL\" >> seen.txt",
            agent_dir, {"OPSBENCH_MANIFEST": str(manifest), "OPSBENCH_LLM_BASE_URL": f"http://127.0.0.1:{llm.port}"},
            30, lambda: False, lambda pid: None)
        survived = _netns_mounted(sentinel)
    finally:
        for server in (gateway, other, llm):
            server.close()
        subprocess.run(["ip", "netns", "delete", sentinel], check=False, capture_output=True)
    seen = (agent_dir / "workspace" / "seen.txt").read_text().splitlines()
    assert result.status == "exited", (result, (agent_dir / "stderr.log").read_text())
    assert seen[0] == f"http://10.0.2.2:{gateway.port}"  # the manifest the agent reads names slirp's host
    assert json.loads(manifest.read_text())["tools"]["url"] == f"http://127.0.0.1:{gateway.port}"  # not the run's
    assert seen[1] == f"http://10.0.2.2:{gateway.port} gateway"
    assert all(" refused " in line for line in seen[2:5]), seen
    assert seen[5] == f"http://10.0.2.2:{llm.port} llm"  # allowed, and its URL pointed at slirp's host
    net = result.isolation["network"]
    assert net["mode"] == "egress" and sorted(net["host_ports"]) == sorted([gateway.port, llm.port])
    assert survived, "the agent's network unmounted the host's netns (containers/libpod#4113)"
    # This test's slirp4netns is a child of this process (unshare execs it); other workers' agents have their own.
    left = subprocess.run(["pgrep", "-af", "-P", str(os.getpid()), "slirp4netns"], capture_output=True, text=True,
                          check=False).stdout
    assert str(agent_dir.parent / "agent-network.log") not in left and "tap0" not in left, left


def test_rules_gateway_mode_allows_nothing_but_the_named_ports() -> None:
    rules = sandbox.network.Rules("gateway", [8080], [("192.0.2.9", 8000)])
    text = rules.nft()
    assert "10.0.2.2 tcp dport { 8080 } accept" in text and "192.0.2.9 tcp dport 8000 accept" in text
    assert "nfproto ipv4 accept" not in text and "policy drop" in text
    egress = sandbox.network.Rules("egress", [8080], [], ["10.89.0.0/24", "192.0.2.2/32"]).nft()
    assert "nfproto ipv4 accept" in egress and "10.89.0.0/24" in egress and "127.0.0.0/8" in egress
    assert egress.index("10.89.0.0/24") < egress.index("nfproto ipv4 accept")


def test_bad_network_settings_are_named(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_NETWORK", "wide")
    result = run(agent_dir, "true")
    assert result.status == "not_started" and "OPSBENCH_AGENT_NETWORK='wide'" in result.detail
    monkeypatch.setenv("OPSBENCH_AGENT_NETWORK", "gateway")
    monkeypatch.setenv("OPSBENCH_AGENT_ALLOW", "127.0.0.1")
    result = run(agent_dir, "true")
    assert result.status == "not_started" and "OPSBENCH_AGENT_ALLOW: '127.0.0.1' is not host:port" in result.detail


def test_a_missing_part_is_recorded_in_auto_and_refused_in_require(agent_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.network, "unavailable_reason", lambda: "not installed: slirp4netns (test)")
    result = run(agent_dir, "touch ran")
    assert result.status == "exited" and result.isolation["network"]["mode"] == "host"
    assert "network namespace: not installed: slirp4netns (test)" in result.isolation["missing"]
    assert "missing: " in sandbox.summary(result.isolation)
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "require")
    (agent_dir / "workspace" / "ran").unlink()
    result = run(agent_dir, "touch ran")
    assert result.status == "not_started" and "slirp4netns (test)" in result.detail
    assert not (agent_dir / "workspace" / "ran").exists()
    monkeypatch.setenv("OPSBENCH_AGENT_NETWORK", "host")  # asked for: not missing, recorded as such
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "auto")
    result = run(agent_dir, "true")
    assert result.isolation["network"] == {"mode": "host", "reason": "OPSBENCH_AGENT_NETWORK=host"}


def test_show_prints_what_was_in_force(agent_dir: Path) -> None:
    from orchestrator.run_views import render_summary

    result = run(agent_dir, "true")
    summary = {"run_id": "r1", "scenario": "s", "status": "completed", "reason": None, "evaluations": {},
               "agent": {"status": "exited", "elapsed": 1.0, "isolation": result.isolation}, "cleanup": "done",
               "recovered": None, "cleanup_problems": []}
    line = next(x for x in render_summary(summary).splitlines() if "agent isolation" in x)
    assert "namespaces (mount, pid" in line and "no capabilities" in line and "read-only host" in line, line
    summary["agent"]["isolation"] = "namespaces (user, mount, pid); hidden: /x"  # a run recorded before issue 19
    assert "agent isolation: namespaces (user, mount, pid)" in render_summary(summary)
