"""Isolation audit (issue 11, item 4): what an agent must not do, tried through every way in.

One table: CHECKS (things an agent must not do) x WAYS (how an agent reaches the benchmark). Each cell is one test
that tries the forbidden thing through that way in and asserts it is refused *and* logged (the trajectory record or
the gateway's log line). Cells that make no sense are absent (a manifest cannot spend a budget), and cells where the
refusal is not enforced yet are in KNOWN_GAPS as strict xfails: the test asserts the refusal, is expected to fail,
and turns into a failure the day it starts passing, so the table never overstates. `test_audit_table` prints the
table and its count (`pytest -s`).

Ways in: `rest` (the gateway's REST API, in-process), `mcp` (the gateway's MCP endpoint over real Streamable HTTP),
`command` (what a command agent process gets: its environment, files and network; the host and network cells
are tried by the probing agent tests/e2e/agents/prober.py, which the live e2e test also runs in a shop run),
`manifest` (the manifest of every
scenario spec), `agent_api` (the remote agents' HTTP API).

Many single behaviours are tested in detail in test_gateway_*.py; the cells here call the same public entry points
once each, so the audit is one place that says what is covered.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from fastapi.testclient import TestClient
from gateway_fixtures import TOKEN, Clock, FakeObservability, make_gateway, make_run_dir, serve_gateway, trajectory
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator import paths
from orchestrator.agent import run_agent
from orchestrator.agent_api import AgentAPI
from orchestrator.gateway.rest import create_app
from orchestrator.run_vars import scenario_vars
from orchestrator.spec import load_scenario, spec_files

OTHER_TOKEN = "another-runs-token-0123456789abcdef0123"
MARKER = "GROUND-TRUTH-MARKER-7f3a"  # planted where only the benchmark may look
MACHINERY = ["prometheus", "alertmanager", "loadgen", "fault-latency", "redis-exporter", "ob-r1-prometheus"]
CONTROL_TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("restart", {}), ("scale", {"replicas": 0}), ("set_env", {"env": {"X": "1"}}), ("rollback", {})]


# -- ways in ------------------------------------------------------------------------------------------------------
@dataclass
class Answer:
    ok: bool
    code: str | None  # the error code (or "unauthorized")
    text: str  # the whole answer, to look for things that must not be in it


class Rest:
    name = "rest"

    def __init__(self, run_dir: Path, **options: Any) -> None:
        self.client = TestClient(create_app(make_gateway(run_dir, **options)))

    def call(self, tool: str, args: dict[str, Any], token: str = TOKEN) -> Answer:
        resp = self.client.post(f"/v1/tools/{tool}", headers={"Authorization": f"Bearer {token}"}, json=args)
        body = resp.json()
        return Answer(bool(body.get("ok")), (body.get("error") or {}).get("code"), resp.text)

    def close(self) -> None:
        self.client.close()


class Mcp:
    """The gateway served by uvicorn in a thread, spoken to by the mcp SDK's client (as test_gateway_mcp does)."""

    name = "mcp"

    def __init__(self, run_dir: Path, **options: Any) -> None:
        self.server, self.thread, self.url = serve_gateway(make_gateway(run_dir, **options))

    async def _call(self, tool: str, args: dict[str, Any], token: str) -> Answer:
        async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
                    Client(streamable_http_client(f"{self.url}/mcp", http_client=http)) as client):
            result = await client.call_tool(tool, args)
        body = result.structured_content or {}
        text = json.dumps(body) + "".join(getattr(c, "text", "") for c in result.content)
        return Answer(not result.is_error, (body.get("error") or {}).get("code"), text)

    def call(self, tool: str, args: dict[str, Any], token: str = TOKEN) -> Answer:
        try:
            return asyncio.run(self._call(tool, args, token))
        except Exception as exc:  # the SDK turns the 401 into an MCPError inside an exception group
            if token != TOKEN:  # the gateway's log (checked by the cell) says why
                return Answer(False, "unauthorized", repr(exc))
            raise

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


GatewayWay = Rest | Mcp


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


@pytest.fixture
def run_dir(tmp_path: Path, obs: FakeObservability) -> Path:
    """A run directory like a deployed shop's, with what only the benchmark may read planted beside it."""
    rd = make_run_dir(tmp_path, obs.url)
    (rd / "state" / "faults").mkdir(parents=True)
    (rd / "state" / "faults" / "latency.json").write_text(json.dumps({"delay_ms": 1234, "marker": MARKER}))
    (rd / "ground_truth.yaml").write_text(f"entities: [{{id: cart-1, rootCause: true, note: {MARKER}}}]\n")
    (rd / "steps" / "05-evaluate").mkdir(parents=True)
    (rd / "steps" / "05-evaluate" / "extravars").write_text(json.dumps({"opsbench_ground_truth": MARKER}))
    return rd


def open_way(name: str, run_dir: Path, **options: Any) -> GatewayWay:
    return Rest(run_dir, **options) if name == "rest" else Mcp(run_dir, **options)


def refused_and_recorded(way: GatewayWay, run_dir: Path, tool: str, args: dict[str, Any], codes: set[str]) -> Answer:
    before = len(trajectory(run_dir))
    answer = way.call(tool, args)
    assert not answer.ok and answer.code in codes, (tool, args, answer)
    records = trajectory(run_dir)
    assert len(records) == before + 1 and records[-1]["tool"] == tool, records[-1:]
    assert records[-1]["status"] in ("denied", "invalid") and records[-1]["transport"] == way.name
    return answer


# -- the cells ----------------------------------------------------------------------------------------------------
def gw_read_ground_truth(way: GatewayWay, run_dir: Path) -> None:
    # No tool reads a host file by name: read_file exists only where the run has a workspace (and reads only inside
    # that container, test_gateway_terminal.py), so here it is denied; a path argument is refused as unknown.
    refused_and_recorded(way, run_dir, "read_file", {"path": str(run_dir / "ground_truth.yaml")}, {"denied"})
    refused_and_recorded(way, run_dir, "search_logs", {"path": str(run_dir / "state")}, {"invalid"})
    refused_and_recorded(way, run_dir, "search_logs", {"service": "../../ground_truth"}, {"not_found", "invalid"})
    # Whatever the tools answer with their defaults, none of it comes from the run's state or ground truth.
    for tool in ("get_alerts", "get_topology", "list_services", "search_logs", "get_traces"):
        answer = way.call(tool, {})
        assert answer.ok and MARKER not in answer.text and "ground_truth" not in answer.text, (tool, answer)


def gw_see_fault_parameters(way: GatewayWay, run_dir: Path) -> None:
    # Fault helper containers are neither listed nor describable, nor are their metrics queryable.
    for tool in ("get_topology", "list_services"):
        answer = way.call(tool, {})
        assert answer.ok and "fault-" not in answer.text and "1234" not in answer.text, (tool, answer.text[:300])
    refused_and_recorded(way, run_dir, "describe_service", {"service": "fault-latency"}, {"denied"})
    refused_and_recorded(way, run_dir, "query_metrics", {"query": 'container_pids{container=~"fault.*"}'},
                         {"denied"})


def gw_reach_observability(way: GatewayWay, run_dir: Path) -> None:
    refused_and_recorded(way, run_dir, "describe_service", {"service": "prometheus"}, {"denied"})
    refused_and_recorded(way, run_dir, "query_metrics", {"query": "prometheus_config_last_reload_successful"},
                         {"denied"})
    refused_and_recorded(way, run_dir, "query_metrics", {"query": 'up{job="prometheus"}'}, {"denied"})
    env = json.loads((run_dir / "environment.json").read_text())
    for tool in ("get_alerts", "get_topology", "list_services"):  # no answer gives the stack's own address away
        answer = way.call(tool, {})
        assert answer.ok and env["endpoints"]["prometheus"] not in answer.text, tool


def gw_act_on_machinery(way: GatewayWay, run_dir: Path) -> None:
    for name in MACHINERY:
        for tool, extra in CONTROL_TOOLS:
            refused_and_recorded(way, run_dir, tool, {"service": name, **extra}, {"denied"})


def gw_other_run_token(way: GatewayWay, run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="opsbench.gateway"):
        answer = way.call("get_topology", {}, token=OTHER_TOKEN)
    assert not answer.ok and answer.code == "unauthorized", answer
    assert "refused POST" in caplog.text and "wrong token" in caplog.text  # logged ...
    assert OTHER_TOKEN not in caplog.text  # ... without the token
    assert trajectory(run_dir) == []  # nothing reached a tool


def gw_exceed_budget(way: GatewayWay, run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    way.close()
    calls = open_way(way.name, run_dir, max_calls=2)
    try:
        assert calls.call("get_topology", {}).ok and calls.call("get_topology", {}).ok
        with caplog.at_level("WARNING", logger="opsbench.gateway"):
            refused = calls.call("get_topology", {})
        assert not refused.ok and refused.code == "budget_exhausted"
        assert trajectory(run_dir)[-1]["status"] == "denied" and "budget" in caplog.text
    finally:
        calls.close()
    late = open_way(way.name, run_dir, deadline=Clock().now - 1)
    try:
        answer = late.call("get_topology", {})
        assert not answer.ok and answer.code == "budget_exhausted" and trajectory(run_dir)[-1]["status"] == "denied"
    finally:
        late.close()


# command agents: what the process gets
def _agent_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: dict[str, str]) -> dict[str, str]:
    """Run a real command agent that dumps its environment; the lifecycle's own variables are passed as extra."""
    for key, value in planted.items():
        monkeypatch.setenv(key, value)
    agent_dir = tmp_path / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    result = run_agent(f"{sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))' > env.json",
                       agent_dir, {"OPSBENCH_MANIFEST": str(agent_dir / "manifest.json")}, 30, lambda: False,
                       lambda pid: None)
    assert result.status == "exited", result
    env: dict[str, str] = json.loads((agent_dir / "workspace" / "env.json").read_text())
    return env


def cmd_orchestrator_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = {"OPSBENCH_JUDGE_API_KEY": "judge-secret-0123456789", "OPSBENCH_AGENT_API_KEY": "api-secret-012345678",
               "OPSBENCH_JUDGE_API_KEY_ENV": "JUDGE_KEY_ELSEWHERE", "JUDGE_KEY_ELSEWHERE": "judge-secret-other-0123"}
    env = _agent_env(tmp_path, monkeypatch, planted)
    text = json.dumps(env)
    for secret in ("judge-secret-0123456789", "api-secret-012345678", "judge-secret-other-0123"):
        assert secret not in text
    assert env["OPSBENCH_MANIFEST"].endswith("manifest.json")


def cmd_read_ground_truth_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _agent_env(tmp_path, monkeypatch, {})
    own = {k: v for k, v in env.items() if k.startswith("OPSBENCH_")}
    assert not any(s in v for v in own.values() for s in ("scenario_specs", "ground_truth", "state/faults")), own


def _sandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> tuple[str, str]:
    """Run `command` as a real command agent of a run under a state dir of its own; (workspace/seen.txt, stderr).
    The run's agent directory is where the lifecycle puts it: inside the state dir the sandbox hides."""
    home = tmp_path / "home"
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    agent_dir = home / "runs" / "r1" / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    result = run_agent(command, agent_dir, {}, 30, lambda: False, lambda pid: None)
    assert result.status in ("exited", "crashed"), result
    assert result.isolation["sandbox"] == "namespaces", result.isolation
    seen = agent_dir / "workspace" / "seen.txt"
    return (seen.read_text() if seen.exists() else ""), (agent_dir / "stderr.log").read_text()


def cmd_read_ground_truth_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The specs (ground truth), the fault roles, the git history and the docs are not in the agent's view."""
    gt = paths.SPECS_DIR / "loopweb-web-down" / "ground_truth.yaml"
    assert "rootCause" in gt.read_text()  # the file is there, outside the sandbox
    seen, err = _sandboxed(tmp_path, monkeypatch, f"cat {gt} {paths.ROLES_DIR}/fault_loopweb_stop/tasks/inject.yml "
                           f"> seen.txt; git -C {paths.PROJECT_ROOT} log -p -1 -- scenario_specs >> seen.txt; "
                           f"grep -rl --exclude-dir=.venv rootCause {paths.PROJECT_ROOT} >> seen.txt")  # .venv: libs
    assert "rootCause" not in seen and "opsbench_item_name" not in seen, seen[:500]
    assert "No such file or directory" in err, err


def cmd_see_fault_parameters_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saved fault state (this run's and another run's) and the gateway's files are under the hidden state dir."""
    home = tmp_path / "home"
    for where in ("runs/r1/state/faults/web.json", "runs/r0/state/faults/web.json", "runs/r1/gateway/config.json"):
        (home / where).parent.mkdir(parents=True, exist_ok=True)
        (home / where).write_text(MARKER)
    seen, _ = _sandboxed(tmp_path, monkeypatch, f"cat {home}/runs/r1/state/faults/web.json "
                         f"{home}/runs/r0/state/faults/web.json {home}/runs/r1/gateway/config.json > seen.txt; "
                         f"grep -r {MARKER} {home} >> seen.txt")
    assert MARKER not in seen, seen[:500]


def cmd_act_on_machinery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's (or any benchmark) process is invisible and out of reach, its trajectory log unwritable."""
    home = tmp_path / "home"
    log = home / "runs" / "r1" / "gateway" / "trajectory.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("")
    stand_in = subprocess.Popen(["sleep", "60"])  # stands in for the gateway
    try:
        seen, _ = _sandboxed(tmp_path, monkeypatch, f"kill -9 {stand_in.pid}; echo forged >> {log}; "
                             "ls /proc | grep -c '^[0-9]' > seen.txt")
        assert stand_in.poll() is None, "the agent killed a benchmark process"
        assert log.read_text() == "", "the agent wrote the gateway's trajectory"
        assert int(seen) <= 4, f"the agent sees {seen} processes"  # its shell, ls, grep (and sh -c)
    finally:
        stand_in.kill()
        stand_in.wait()


def cmd_orchestrator_secrets_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestrator's key files and its processes' environment (/proc/<pid>/environ) are out of reach."""
    key_file = tmp_path / "judge.key"
    key_file.write_text("judge-file-secret-0123456789")
    monkeypatch.setenv("OPSBENCH_JUDGE_API_KEY_FILE", str(key_file))
    monkeypatch.setenv("OPSBENCH_JUDGE_API_KEY", "judge-env-secret-0123456789")
    holder = subprocess.Popen(["sleep", "60"], env={"OPSBENCH_JUDGE_API_KEY": "judge-env-secret-0123456789"})
    try:
        seen, _ = _sandboxed(tmp_path, monkeypatch, f"cat {key_file} /proc/{holder.pid}/environ > seen.txt; "
                             "cat /proc/*/environ >> seen.txt")
    finally:
        holder.kill()
        holder.wait()
    assert "judge-file-secret" not in seen and "judge-env-secret" not in seen, seen[:500]


def cmd_exceed_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_dir = tmp_path / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    result = run_agent("sleep 60 & sleep 60", agent_dir, {}, 1, lambda: False, lambda pid: None)
    assert result.status == "timeout" and "budget" in result.detail  # recorded in the run's agent result
    procs = subprocess.run(["pgrep", "-f", "sleep 60 & sleep 60"], capture_output=True, text=True, check=False)
    assert procs.stdout.strip() == "", "the agent's process group outlived its budget"


# command agents: the host and the network (issue 19), tried by the probing agent of the live e2e test
PROBER = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "prober.py"
_PROBE: dict[str, Any] = {}


class _StandIn:
    """An HTTP server standing in for a benchmark service (Prometheus, another run's gateway ...)."""

    def __init__(self, name: str, host: str = "127.0.0.1") -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.end_headers()
                self.wfile.write(name.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.address = f"{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The prober's report (run once for the module's cells): a run with a gateway, stand-ins for Prometheus,
    Alertmanager, another run's gateway and a service on the host's own address (as the runs' podman networks
    are reached), another run's agent directory, the real container storage and the invoking user's home."""
    if _PROBE:
        return _PROBE
    from orchestrator.sandbox import network, storage_dirs

    home = tmp_path / "home"
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    agent_dir = home / "runs" / "r1" / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    other = home / "runs" / "r0" / "agent"
    (other / "workspace").mkdir(parents=True)
    (other / "output.json").write_text(MARKER)
    host_ip = next((n.split("/")[0] for n in network.host_networks() if n.endswith("/32")
                    and not n.startswith("127.")), "127.0.0.1")
    servers = {"gateway": _StandIn("gateway"), "prometheus": _StandIn("prometheus"),
               "alertmanager": _StandIn("alertmanager"), "another run's gateway": _StandIn("gateway r0"),
               "a service on the host's address": _StandIn("exporter", host_ip)}
    try:
        manifest = {"tools": {"url": f"http://{servers['gateway'].address}"}}
        (agent_dir / "manifest.json").write_text(json.dumps(manifest))
        targets = agent_dir / "workspace" / "targets.json"
        targets.write_text(json.dumps({k: v.address for k, v in servers.items() if k != "gateway"}))
        storage = " ".join(f"--storage {d}" for d in storage_dirs())
        result = run_agent(f"{sys.executable} {PROBER} --home {Path.home()} {storage} --agent-dir {other} "
                           f"--targets {targets} --wait 0", agent_dir,
                           {"OPSBENCH_MANIFEST": str(agent_dir / "manifest.json")}, 120, lambda: False,
                           lambda pid: None)
    finally:
        for server in servers.values():
            server.close()
    assert result.status == "exited", (result, (agent_dir / "stderr.log").read_text()[-2000:])
    _PROBE.update(json.loads((agent_dir / "workspace" / "probe.json").read_text()))
    _PROBE["isolation"] = result.isolation
    return _PROBE


def _refused(report: dict[str, Any], *prefixes: str) -> None:
    cells = {k: v for k, v in report["cells"].items() if k.startswith(prefixes)}
    assert cells and all(v["refused"] for v in cells.values()), cells


def cmd_write_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(_probe(tmp_path, monkeypatch), "write /etc", "write the interpreter", "write the venv")


def cmd_read_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(_probe(tmp_path, monkeypatch), "read the invoking user's ~/.ssh")


def cmd_container_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(tmp_path, monkeypatch)
    if any(k.startswith("read container storage") for k in report["cells"]):
        _refused(report, "read container storage", "write container storage")
    else:  # no storage configured here: the plan still hides where it would be
        assert {"/var/lib/opsbench", "/run/opsbench"} <= set(report["isolation"]["hidden"])


def cmd_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(_probe(tmp_path, monkeypatch), "podman against the storage")


def cmd_other_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(_probe(tmp_path, monkeypatch), "read another run's agent dir")


def net_observability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(tmp_path, monkeypatch)
    _refused(report, "connect prometheus", "connect alertmanager")
    assert report["gateway"]["reachable"], report["gateway"]  # and its own gateway still answers


def net_machinery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exporters, flagd and fault proxies listen on the runs' podman networks or the host's loopback."""
    report = _probe(tmp_path, monkeypatch)
    _refused(report, "connect a service on the host's address", "host loopback ports beyond the manifest's")
    assert report["gateway"]["reachable"], report["gateway"]


def net_other_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(tmp_path, monkeypatch)
    _refused(report, "connect another run's gateway")
    assert report["gateway"]["reachable"], report["gateway"]


# manifests of every scenario spec
def _manifests(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    for spec in spec_files():
        scn = load_scenario(spec)
        manifest = scenario_vars(scn, "r-audit", Path("/runs/r-audit"))["manifest"]
        yield scn, json.dumps(manifest)


def man_read_ground_truth(tmp_path: Path) -> None:
    n = 0
    for scn, text in _manifests(tmp_path):
        n += 1
        for forbidden in (scn.id, "ground_truth", "scenario_specs", "state/faults", str(scn.path.parent)):
            assert forbidden not in text, (scn.id, forbidden)
    assert n >= 50


def man_see_fault_parameters(tmp_path: Path) -> None:
    for scn, text in _manifests(tmp_path):
        for fault in scn.faults:
            assert fault["role"] not in text and fault["name"] not in text, (scn.id, fault["name"])
            assert "fault_" not in text


def man_reach_observability(tmp_path: Path) -> None:
    # The handover role drops these endpoints from the manifest; the agent reaches alerts and metrics via tools.
    defaults = yaml.safe_load((paths.ROLES_DIR / "agent_access" / "defaults" / "main.yml").read_text())
    assert {"prometheus", "alertmanager"} <= set(defaults["agent_access_hidden_endpoints"])
    handover = (paths.ROLES_DIR / "agent_access" / "tasks" / "handover.yml").read_text()
    assert "rejectattr('key', 'in', agent_access_hidden_endpoints)" in handover
    for _, text in _manifests(tmp_path):
        assert "9090" not in text and "9093" not in text


# the remote agents' API
def _http(url: str, key: str, method: str = "GET", body: Any = None) -> int:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def api_other_run_token(tmp_path: Path) -> None:
    with AgentAPI("the-operators-key-0123456789") as api:
        api.ready({"run": "r1", "output": {}}, TOKEN, tmp_path / "output.json")
        for key in (TOKEN, OTHER_TOKEN):  # the gateway token of this run or another's opens nothing here
            assert _http(f"{api.url}/v1/manifest", key) == 401
            assert _http(f"{api.url}/v1/output", key, "PUT", {"entities": []}) == 401
        assert [e["event"] for e in api.state.events] == ["unauthorized"] * 4  # logged
    assert not (tmp_path / "output.json").exists()


def api_exceed_budget(tmp_path: Path) -> None:
    from orchestrator.agent_api import wait_for_remote

    key = "the-operators-key-0123456789"
    with AgentAPI(key) as api:
        api.ready({"run": "r1", "output": {}}, TOKEN, tmp_path / "output.json")
        status, detail = wait_for_remote(api, 0, lambda: False, poll=0.01)
        assert status == "timeout" and "budget" in detail
        api.close()
    with AgentAPI(key) as late:  # after the agent phase, an upload is refused
        late.ready({"run": "r1", "output": {}}, TOKEN, tmp_path / "output.json")
        late.state.phase = "closed"
        assert _http(f"{late.url}/v1/output", key, "PUT", {"entities": []}) == 409
        assert _http(f"{late.url}/v1/manifest", key) == 410
    assert not (tmp_path / "output.json").exists()


# -- the table ----------------------------------------------------------------------------------------------------
CHECKS = ["read ground truth or scenario files", "see fault parameters", "reach the observability stack's config",
          "act on the observability stack or fault machinery", "use another run's token", "exceed its budget",
          "get the orchestrator's own credentials", "write the host (/etc, the interpreter, the venv)",
          "read the invoking user's ~/.ssh", "read or write the container storage",
          "run podman against the container storage", "read another run's agent directory",
          "reach exporters, flagd or a fault proxy", "reach another run's gateway"]
WAYS = ["rest", "mcp", "command", "manifest", "agent_api"]
Cell = Callable[..., None]
AUDIT: dict[tuple[str, str], Cell] = {}
for _way in ("rest", "mcp"):
    AUDIT[(CHECKS[0], _way)] = gw_read_ground_truth
    AUDIT[(CHECKS[1], _way)] = gw_see_fault_parameters
    AUDIT[(CHECKS[2], _way)] = gw_reach_observability
    AUDIT[(CHECKS[3], _way)] = gw_act_on_machinery
    AUDIT[(CHECKS[4], _way)] = gw_other_run_token
    AUDIT[(CHECKS[5], _way)] = gw_exceed_budget
AUDIT[(CHECKS[0], "command")] = cmd_read_ground_truth_env
AUDIT[(CHECKS[0], "command (files)")] = cmd_read_ground_truth_files
AUDIT[(CHECKS[1], "command (files)")] = cmd_see_fault_parameters_files
AUDIT[(CHECKS[3], "command (files)")] = cmd_act_on_machinery
AUDIT[(CHECKS[6], "command (files)")] = cmd_orchestrator_secrets_files
AUDIT[(CHECKS[6], "command")] = cmd_orchestrator_secrets
AUDIT[(CHECKS[5], "command")] = cmd_exceed_budget
AUDIT[(CHECKS[7], "command (files)")] = cmd_write_host
AUDIT[(CHECKS[8], "command (files)")] = cmd_read_ssh
AUDIT[(CHECKS[9], "command (files)")] = cmd_container_storage
AUDIT[(CHECKS[10], "command (files)")] = cmd_podman
AUDIT[(CHECKS[11], "command (files)")] = cmd_other_agent_dir
AUDIT[(CHECKS[2], "command (network)")] = net_observability
AUDIT[(CHECKS[12], "command (network)")] = net_machinery
AUDIT[(CHECKS[13], "command (network)")] = net_other_gateway
AUDIT[(CHECKS[0], "manifest")] = man_read_ground_truth
AUDIT[(CHECKS[1], "manifest")] = man_see_fault_parameters
AUDIT[(CHECKS[2], "manifest")] = man_reach_observability
AUDIT[(CHECKS[4], "agent_api")] = api_other_run_token
AUDIT[(CHECKS[5], "agent_api")] = api_exceed_budget

# Cells whose refusal is not enforced yet (strict xfails). Empty since the command agent sandbox
# (orchestrator/sandbox/) closed the last ones: a command agent could read scenario_specs/ (issue 11), and write
# /etc, read ~/.ssh and the container storage, and reach Prometheus on the host's loopback (issue 19).
KNOWN_GAPS: dict[tuple[str, str], str] = {}
RESULTS: dict[tuple[str, str], str] = {}


def _params() -> list[Any]:
    out = []
    for key in AUDIT:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[key])] if key in KNOWN_GAPS else []
        out.append(pytest.param(key, id=f"{key[1]}:{key[0].replace(' ', '-')}", marks=marks))
    return out


@pytest.mark.parametrize("cell", _params())
def test_audit(cell: tuple[str, str], request: pytest.FixtureRequest, tmp_path: Path) -> None:
    fn = AUDIT[cell]
    RESULTS[cell] = "known gap" if cell in KNOWN_GAPS else "FAILED"
    if cell[1] in ("rest", "mcp"):
        run_dir = request.getfixturevalue("run_dir")
        way = open_way(cell[1], run_dir)
        try:
            kwargs: dict[str, Any] = {}
            if "caplog" in fn.__code__.co_varnames:
                kwargs["caplog"] = request.getfixturevalue("caplog")
            fn(way, run_dir, **kwargs)
        finally:
            way.close()
    elif cell[1].startswith("command"):
        fn(tmp_path, request.getfixturevalue("monkeypatch"))
    else:
        fn(tmp_path)
    RESULTS[cell] = "refused and logged" if cell[1] in ("rest", "mcp", "agent_api") else "refused"


def test_audit_table() -> None:
    """Runs after the cells (file order): prints the table and checks that every cell ran."""
    if not RESULTS:
        pytest.skip("the audit cells were not selected in this session (e.g. -k), nothing to tabulate")
    lines = [f"{'check':52} {'way in':18} result"]
    lines += [f"{check:52} {way:18} {RESULTS.get((check, way), 'not run')}" for check, way in AUDIT]
    enforced = sum(1 for v in RESULTS.values() if v.startswith("refused"))
    lines.append(f"isolation audit: {len(AUDIT)} cells, {enforced} enforced, {len(KNOWN_GAPS)} known gap(s)")
    print("\n" + "\n".join(lines))
    assert set(RESULTS) == set(AUDIT), "some cells did not run"
    assert all(v != "FAILED" for k, v in RESULTS.items() if k not in KNOWN_GAPS), RESULTS
