"""The local backend for real: the shop under podman with Prometheus, Alertmanager and telemetry.

One environment is deployed for the module (`opsbench run shop-healthy-baseline --keep`, which
also proves the baseline checks: targets up, load flowing, telemetry arriving, no alert) and a
second one for the isolation test; both are torn down with `opsbench cleanup --teardown`.

The module's run has the probing agent (tests/e2e/agents/prober.py) as its agent: it tries every way out of its
containment against the real shop (Prometheus, Alertmanager, every scraped exporter and service, the containers'
addresses, the flags file, the container storage, another run's gateway and agent directory), then runs the
heuristic baseline agent so the run goes on as usual; `test_a_probing_agent_is_refused_everything` reads its report.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_api_client import PrometheusConnect

from orchestrator.gateway import PodmanControl
from orchestrator.telemetry import TelemetryStore
from orchestrator.topology import run_topology

from .conftest import port_open, run_cli, run_json
from .probing import assert_refused_everything, podman, prober

pytestmark = pytest.mark.e2e
SCENARIO = "shop-healthy-baseline"


def deploy(home: Path, *agent: str, timeout: float = 300, **env: str) -> dict[str, Any]:
    rc, result = run_json(home, "run", SCENARIO, "--keep", *agent, timeout=timeout, **env)
    if rc != 0 and result.get("run_id"):  # a kept environment that failed its baseline must not leak
        run_cli(home, "cleanup", "--teardown", result["run_id"], "--json")
    assert rc == 0, (result.get("reason"), result.get("phases"))
    assert result["status"] == "completed" and result["phases"]["baseline"]["status"] == "successful"
    run_dir = Path(result["run_dir"])
    return {"run_id": result["run_id"], "run_dir": run_dir,
            "env": json.loads((run_dir / "environment.json").read_text()), "result": result}


def teardown_and_check(home: Path, run: dict[str, Any]) -> None:
    proc = run_cli(home, "cleanup", "--teardown", run["run_id"], "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["steps"] == ["teardown"]
    label = f"label=opsbench.run={run['run_id']}"
    assert podman("ps", "-a", "--filter", label, "--format", "{{.Names}}").stdout.strip() == ""
    assert podman("network", "exists", f"ob-{run['run_id']}").returncode != 0
    assert podman("volume", "exists", f"ob-{run['run_id']}-pgdata").returncode != 0
    assert podman("secret", "ls", "--format", "{{.Name}}").stdout.count(run["run_id"]) == 0
    for url in run["env"]["endpoints"].values():
        assert not port_open(int(url.rsplit(":", 1)[1]))
    assert not (run["run_dir"] / "env").exists() and not (run["run_dir"] / "secrets").exists()


@pytest.fixture(scope="module")
def shop_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shop-home")


@pytest.fixture(scope="module")
def shop(shop_home: Path) -> Iterator[dict[str, Any]]:
    with prober(shop_home, then="orchestrator.agents.heuristic") as (agent, env):
        run = deploy(shop_home, "--agent", agent, timeout=600, **env)  # a guard: 300 s ran out at load 40
    try:
        yield run
    finally:
        teardown_and_check(shop_home, run)


def test_a_probing_agent_is_refused_everything(shop: dict[str, Any]) -> None:
    """Issue 19: in a real shop run the agent writes nothing of the host's, reads no home, storage or other run,
    reaches none of the observability stack, exporters, containers or other gateways, and still its own gateway."""
    report = assert_refused_everything(shop["run_dir"], shop["result"], {
        "connect prometheus", "connect alertmanager", "read the flags file", "write the flags file"})
    cells = report["cells"]
    assert any(k.startswith("connect scrape target") for k in cells) and any(k.startswith("connect container")
                                                                             for k in cells), sorted(cells)


def prom(run: dict[str, Any]) -> PrometheusConnect:
    return PrometheusConnect(url=run["env"]["endpoints"]["prometheus"], disable_ssl=True)


def active_alerts(run: dict[str, Any]) -> list[dict[str, Any]]:
    with urllib.request.urlopen(run["env"]["endpoints"]["alertmanager"] + "/api/v2/alerts?active=true") as resp:
        alerts: list[dict[str, Any]] = json.loads(resp.read())
    return alerts


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_gateway_serves_the_shop(shop: dict[str, Any]) -> None:
    gateway = shop["env"]["endpoints"]["gateway"]
    with urllib.request.urlopen(gateway + "/api/products", timeout=5) as resp:
        products = json.loads(resp.read())
    assert resp.status == 200 and len(products["products"] if isinstance(products, dict) else products) >= 5
    with urllib.request.urlopen(gateway + "/", timeout=5) as resp:
        assert "<html" in resp.read().decode().lower()


def test_promql_sees_every_service_and_its_golden_signals(shop: dict[str, Any]) -> None:
    p = prom(shop)
    up = p.custom_query("up")
    services = {s["metric"].get("service") for s in up}
    assert {"frontend", "catalog", "cart", "checkout", "payment", "shipping", "email", "currency",
            "recommendation", "ads", "redis", "postgres", "gateway", "loadgen"} <= services
    # Per-container resource use from the host-side exporter.
    memory = {s["metric"]["container"]: float(s["value"][1]) for s in p.custom_query("container_memory_usage_bytes")}
    assert {"postgres-1", "frontend-2", "prometheus"} <= set(memory) and all(v > 0 for v in memory.values())
    assert p.custom_query("rate(container_cpu_usage_seconds_total[20s]) > 0")
    assert all(s["value"][1] == "1" for s in up)
    replicas = {s["metric"]["instance_id"] for s in up if s["metric"].get("service") in ("frontend", "catalog")}
    assert replicas == {"frontend-1", "frontend-2", "catalog-1", "catalog-2"}
    rates = p.custom_query('sum by (service) (rate(http_server_requests_total{route!~"/healthz|/metrics"}[30s]))')
    busy = {r["metric"]["service"] for r in rates if float(r["value"][1]) > 0}
    assert {"frontend", "catalog", "checkout", "cart"} <= busy
    assert p.custom_query("redis_up == 1") and p.custom_query("pg_up == 1") and p.custom_query("nginx_up == 1")
    latency = p.custom_query("histogram_quantile(0.95, sum by (le) (rate(http_server_request_duration_seconds_bucket"
                             '{service="frontend"}[30s])))')
    assert latency and 0 < float(latency[0]["value"][1]) < 5


def test_traces_and_logs_are_queryable(shop: dict[str, Any]) -> None:
    with TelemetryStore(Path(shop["env"]["telemetry"])) as store:
        traces = store.get_traces(service="checkout", limit=5)
        assert traces.total > 0
        # The newest trace may still be in flight (its frontend span is written when the request ends): one of
        # the five must be whole, across services.
        fetched = [(item["trace_id"], store.get_trace(item["trace_id"])) for item in traces.items]
        whole = [(tid, spans) for tid, spans in fetched if {"frontend", "checkout"} <= {s["service"] for s in spans}]
        assert whole, fetched
        trace_id, trace = whole[0]
        assert any(s["depth"] > 0 for s in trace)
        logs = store.search_logs(trace_id=trace_id, limit=50)
        assert logs.total > 0 and all(rec["trace_id"] == trace_id for rec in logs.items)
        assert store.search_logs(service="cart", limit=1).total > 0


def test_topology_merges_declared_edges_with_measured_calls(shop: dict[str, Any]) -> None:
    topo = run_topology(shop["run_dir"])
    observed = {(e["source"], e["target"]) for e in topo["edges"] if e["type"] == "calls" and e.get("observed")}
    assert {("frontend", "checkout"), ("checkout", "payment"), ("checkout", "cart")} <= observed
    owns = {(e["source"], e["target"]) for e in topo["edges"] if e["type"] == "owns"}
    assert ("frontend", "frontend-2") in owns
    ids = {e["id"] for e in topo["entities"]}
    assert all(e["source"] in ids and e["target"] in ids for e in topo["edges"])


def test_alert_fires_for_a_stopped_service_and_resolves(shop: dict[str, Any]) -> None:
    cart = f"ob-{shop['run_id']}-cart-1"
    assert podman("stop", "-t", "1", cart).returncode == 0
    try:
        wait_for(lambda: [a for a in active_alerts(shop)
                          if a["labels"]["alertname"] == "ServiceDown" and a["labels"].get("service") == "cart"],
                 60, "ServiceDown for cart")
        wait_for(lambda: [a for a in active_alerts(shop) if a["labels"]["alertname"] == "ContainerNotRunning"
                          and a["labels"].get("container") == "cart-1"], 60, "ContainerNotRunning for cart-1")
    finally:
        assert podman("start", cart).returncode == 0
    wait_for(lambda: not [a for a in active_alerts(shop) if a["labels"].get("service") == "cart"
                          and a["labels"]["alertname"] == "ServiceDown"], 60, "ServiceDown to resolve")


def test_two_runs_are_isolated(shop: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "home2"
    home.mkdir()
    other = deploy(home)
    try:
        assert other["env"]["endpoints"]["gateway"] != shop["env"]["endpoints"]["gateway"]
        for run in (shop, other):
            # Every scraped target is a container of the run's own network.
            instances = {s["metric"]["instance"] for s in prom(run).custom_query('up{job!~"containers|prometheus"}')}
            assert instances and all(i.startswith(f"ob-{run['run_id']}-") for i in instances), instances
            # The host-side container exporter reports this run's containers only.
            containers = prom(run).custom_query("container_running")
            own = podman("ps", "-a", "--filter", f"label=opsbench.run={run['run_id']}", "--format", "{{.Names}}")
            assert len(containers) == len(own.stdout.split()) == 21
        # A failure in one run alerts in that run only.
        cart = f"ob-{other['run_id']}-cart-1"
        assert podman("stop", "-t", "1", cart).returncode == 0
        wait_for(lambda: [a for a in active_alerts(other) if a["labels"]["alertname"] == "ServiceDown"], 60,
                 "ServiceDown in the second run")
        assert not [a for a in active_alerts(shop) if a["labels"]["alertname"] == "ServiceDown"]
        assert all(a["labels"].get("opsbench_run") == other["run_id"] for a in active_alerts(other))
    finally:
        teardown_and_check(home, other)


def test_topology_cli_prints_json(shop: dict[str, Any], shop_home: Path) -> None:
    proc = run_cli(shop_home, "topology", shop["run_id"])
    assert proc.returncode == 0, proc.stderr
    topo = json.loads(proc.stdout)
    assert {"entities", "edges"} <= set(topo)
    assert any(e.get("observed") for e in topo["edges"])


def test_scaling_adds_instances_that_prometheus_scrapes_and_removes_them(shop: dict[str, Any]) -> None:
    run_id, run_dir = shop["run_id"], shop["run_dir"]
    control = PodmanControl(run_id, f"ob-{run_id}-", None, spec_file=run_dir / "env" / "containers.json")
    p = prom(shop)

    def scraped(instance: str) -> bool:
        return any(r["value"][1] == "1" for r in p.custom_query(f'up{{instance_id="{instance}"}}'))

    result = control.scale("cart", 2)
    assert result["added"] == ["cart-2"]
    try:
        wait_for(lambda: scraped("cart-2"), 60, "Prometheus to scrape the added cart-2")
        running = next(s["instances"] for s in control.list_services() if s["service"] == "cart")
        assert [(i["id"], i["state"]) for i in running] == [("cart-1", "running"), ("cart-2", "running")]
    finally:
        result = control.scale("cart", 1)
    assert result["removed"] == ["cart-2"] and result["instances"] == ["cart-1"]
    assert json.loads((run_dir / "env" / "config" / "scaled_targets.json").read_text()) == []
    assert podman("container", "exists", f"ob-{run_id}-cart-2").returncode != 0
    wait_for(lambda: not any(t["labels"].get("instance_id") == "cart-2"
                             for t in p.get_targets()["activeTargets"]), 60, "cart-2 to leave the targets")


def test_missing_image_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    from .conftest import scenario_copy

    def missing_image(spec: dict[str, Any]) -> None:
        spec["environment"]["args"] = {"shop_image": "localhost/opsbench-shop:does-not-exist"}

    home = tmp_path / "home"
    home.mkdir()
    spec_dir = scenario_copy(tmp_path, SCENARIO, missing_image)
    rc, result = run_json(home, "run", str(spec_dir))
    assert rc == 4 and result["status"] == "error"
    assert "does-not-exist" in result["reason"] and "make setup" in result["reason"]
    assert result["phases"]["teardown"]["status"] == "successful"
    run_id = result["run_id"]
    assert podman("ps", "-a", "--filter", f"label=opsbench.run={run_id}", "--format", "{{.Names}}").stdout == ""
    assert podman("network", "exists", f"ob-{run_id}").returncode != 0


def test_prometheus_that_cannot_start_is_named_in_the_error(tmp_path: Path) -> None:
    from .conftest import scenario_copy

    def broken_prometheus(spec: dict[str, Any]) -> None:
        # An invalid scrape interval makes Prometheus refuse its configuration and exit.
        spec["environment"]["args"] = {"scrape_interval": "soon", "start_timeout": 20}

    home = tmp_path / "home"
    home.mkdir()
    spec_dir = scenario_copy(tmp_path, SCENARIO, broken_prometheus)
    rc, result = run_json(home, "run", str(spec_dir))
    assert rc == 4 and result["status"] == "error"
    assert "did not become healthy" in result["reason"] and "-prometheus" in result["reason"], result["reason"]
    assert result["phases"]["teardown"]["status"] == "successful"
    run_id = result["run_id"]
    assert podman("ps", "-a", "--filter", f"label=opsbench.run={run_id}", "--format", "{{.Names}}").stdout == ""
