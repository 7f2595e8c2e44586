"""The kubernetes backend without a cluster: every manifest its roles render, validated against the
Kubernetes schemas that kubernetes-validate ships (strict), and every fault role injected into and
removed from the rendered objects.

One ansible-playbook run (playbooks/k8s_render.yml) renders the environment (plain and Prometheus
Operator modes) through env_k8s_shop's own templates and runs every fault_k8s_* role in offline mode;
it took 3-7 min on the shared 2-core development machine under load (about 430 tasks), so it runs
once per session.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import kubernetes_validate
import pytest
import yaml

from orchestrator import paths
from orchestrator.runner import ansible_env

# The Kubernetes versions the backend supports (docs/backends.md).
K8S_VERSIONS = ["1.29.0", "1.30.0", "1.31.0", "1.32.0"]
CRD_GROUPS = ("monitoring.coreos.com/",)  # no schema in kubernetes-validate; checked by shape below
FAULT_ROLES = sorted(p.name for p in paths.ROLES_DIR.glob("fault_k8s_*") if p.is_dir())
RENDER_PLAYBOOK = paths.PROJECT_ROOT / "playbooks" / "k8s_render.yml"


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s-render")
    ansible_playbook = str(Path(sys.executable).parent / "ansible-playbook")
    proc = subprocess.run([ansible_playbook, str(RENDER_PLAYBOOK), "-e", f"opsbench_k8s_render_dir={out}"],
                          cwd=paths.PROJECT_ROOT, env=ansible_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


def _docs(files: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                docs.append((f"{f.parent.name}/{f.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


def _validate(doc: dict[str, Any], version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(map(str, exc.path))
        raise AssertionError(f"{doc['kind']}/{doc['metadata']['name']} invalid for Kubernetes {version} "
                             f"at {where}: {exc.message}") from None


def test_fault_library_has_at_least_twelve_roles():
    assert len(FAULT_ROLES) >= 12, FAULT_ROLES


def test_render_playbook_covers_every_fault_role():
    play = yaml.safe_load(RENDER_PLAYBOOK.read_text())[0]
    covered = {f["role"] for f in play["vars"]["opsbench_k8s_render_faults"]}
    assert covered == set(FAULT_ROLES)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_environment_manifests_validate(rendered: Path, version: str):
    docs = _docs(sorted((rendered / "plain").glob("*.yaml")) + sorted((rendered / "operator").glob("*.yaml")))
    kinds = {d["kind"] for _, d in docs}
    assert {"Namespace", "Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount", "Role",
            "RoleBinding"} <= kinds
    checked = 0
    for _, doc in docs:
        if doc["apiVersion"].startswith(CRD_GROUPS):
            continue
        _validate(doc, version)
        checked += 1
    assert checked > 40


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_agent_access_objects_validate(rendered: Path, version: str):
    docs = dict(_docs(sorted((rendered / "access").glob("*.yaml"))))
    assert len(docs) == 8
    for doc in docs.values():
        _validate(doc, version)
    roles = {k.split("/")[1].split(".")[0]: d for k, d in docs.items() if d["kind"] == "Role"}
    read_only = {v for r in roles["diagnose"]["rules"] for v in r["verbs"]}
    assert read_only == {"get", "list", "watch"}
    assert "patch" in {v for r in roles["mitigate"]["rules"] for v in r["verbs"]}
    # Never cluster-wide: only namespaced objects, in the run's namespace.
    assert {d["kind"] for d in docs.values()} == {"ServiceAccount", "Role", "RoleBinding", "Secret"}
    assert {d["metadata"]["namespace"] for d in docs.values()} == {"ob-render"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_fault_objects_validate(rendered: Path, version: str):
    files = sorted((rendered / "faults").glob("*/*.yaml"))
    assert {f.parent.name for f in files} >= {"bad-image", "quota", "netpol", "secret", "affinity"}
    for _, doc in _docs(files):
        _validate(doc, version)


def test_workloads_have_requests_limits_and_probes(rendered: Path):
    deployments = [d for _, d in _docs(sorted((rendered / "plain").glob("*.yaml"))) if d["kind"] == "Deployment"]
    assert {"frontend", "cart", "checkout", "redis", "postgres", "gateway", "prometheus", "alertmanager",
            "kube-state-metrics", "loadgen"} <= {d["metadata"]["name"] for d in deployments}
    for dep in deployments:
        for c in dep["spec"]["template"]["spec"]["containers"]:
            name = f"{dep['metadata']['name']}/{c['name']}"
            assert c["resources"]["requests"] and c["resources"]["limits"], name
            if dep["metadata"]["name"] != "loadgen":
                assert "readinessProbe" in c and "livenessProbe" in c, name
    replicas = {d["metadata"]["name"]: d["spec"]["replicas"] for d in deployments}
    assert replicas["frontend"] == 2 and replicas["catalog"] == 2 and replicas["cart"] == 1


def _env_shop_rules(alert_for: str, **more: Any) -> dict[str, Any]:
    text = (paths.ROLES_DIR / "env_shop" / "templates" / "alert_rules.yml.j2").read_text()
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(text).render(
        ansible_managed="managed", env_shop_alert_for=alert_for, **more)
    return yaml.safe_load(rendered)  # type: ignore[no-any-return]


def test_golden_signal_rules_are_env_shops(rendered: Path):
    # One source: the kubernetes backend renders env_shop's own template with its alert delay.
    defaults = yaml.safe_load((paths.ROLES_DIR / "env_k8s_shop" / "defaults" / "main.yml").read_text())
    rules_cm = next(d for _, d in _docs([rendered / "plain" / "observability.yaml"])
                    if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "prometheus-rules")
    k8s_golden = yaml.safe_load(rules_cm["data"]["alert_rules.yml"])
    assert k8s_golden == _env_shop_rules(defaults["env_k8s_shop_alert_for"], env_shop_alert_quiet_routes_excluded=True)
    # Kubelet probes and scrapes are not served traffic: on Kubernetes they would hide a service that lost its callers
    # (a Service on the wrong port) from ServiceTrafficDrop; the local backend's rules count them, as verified.
    exprs = {r["alert"]: r["expr"] for g in k8s_golden["groups"] for r in g["rules"] if "alert" in r}
    local = {r["alert"]: r["expr"] for g in _env_shop_rules("10s")["groups"] for r in g["rules"] if "alert" in r}
    for name in ("ServiceErrorRateHigh", "ServiceTrafficDrop"):
        assert exprs[name].count('route!~"/healthz|/metrics"') == 2, exprs[name]
        assert "route" not in local[name]
    k8s_rules = yaml.safe_load(rules_cm["data"]["k8s_rules.yml"])
    recorded = {r.get("record") for g in k8s_rules["groups"] for r in g["rules"]}
    # The shared ContainerNotRunning / ContainerRestarted rules need these series on Kubernetes.
    assert {"container_running", "container_start_time_seconds"} <= recorded
    # The operator mode carries exactly the same rule groups.
    prom_rule = next(d for _, d in _docs([rendered / "operator" / "observability-operator.yaml"])
                     if d["kind"] == "PrometheusRule")
    assert prom_rule["spec"]["groups"] == (yaml.safe_load(rules_cm["data"]["alert_rules.yml"])["groups"]
                                           + k8s_rules["groups"])


def test_prometheus_discovers_every_scraped_workload_by_dns(rendered: Path, tmp_path: Path):
    # Discovery by DNS (any cluster, Debian's prometheus): one SRV job per workload that carries the scrape
    # annotations, each naming that workload's headless Service on its metrics port.
    docs = [d for _, d in _docs(sorted((rendered / "plain").glob("*.yaml")))]
    annotated = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"] for d in docs
                 if d["kind"] == "Deployment"
                 and d["spec"]["template"]["metadata"].get("annotations", {}).get("opsbench.io/scrape-job")}
    headless = {d["metadata"]["name"]: d for d in docs
                if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"}
    config_cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "prometheus-config")
    config = yaml.safe_load(config_cm["data"]["prometheus.yml"])
    assert "kubernetes_sd_configs" not in config_cm["data"]["prometheus.yml"]
    jobs = {j["job_name"]: j for j in config["scrape_configs"] if "dns_sd_configs" in j}
    assert set(jobs) == set(annotated) and {"cart", "loadgen", "redis-exporter"} <= set(jobs)
    for name, ann in annotated.items():
        svc = headless[f"{name}-scrape"]
        assert svc["spec"]["publishNotReadyAddresses"] is True
        assert svc["spec"]["selector"]["app.kubernetes.io/name"] == name
        assert svc["spec"]["ports"] == [{"name": "metrics", "port": int(ann["opsbench.io/scrape-port"]),
                                         "targetPort": int(ann["opsbench.io/scrape-port"]), "protocol": "TCP"}]
        assert jobs[name]["dns_sd_configs"][0]["names"] == [f"_metrics._tcp.{name}-scrape"]
        labels = {r["target_label"]: r.get("replacement") for r in jobs[name]["relabel_configs"]}
        assert labels["job"] == ann["opsbench.io/scrape-job"] and "instance_id" in labels
    # Debian's own promtool (the build the infra image runs) accepts the configuration.
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    (tmp_path / "prometheus.yml").write_text(config_cm["data"]["prometheus.yml"])
    proc = subprocess.run([promtool, "check", "config", "--syntax-only", str(tmp_path / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_env_shop_rules_render_unchanged_for_the_local_backend():
    # env_shop is not modified by the kubernetes backend: its defaults keep `for: 10s`, 5 s for the error ratios.
    defaults = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "defaults" / "main.yml").read_text())
    rules = _env_shop_rules(defaults["env_shop_alert_for"],
                            env_shop_error_alert_for=defaults["env_shop_error_alert_for"])
    fors = {r["alert"]: r.get("for") for g in rules["groups"] for r in g["rules"]}
    assert fors["ServiceLatencyHigh"] == "10s" and fors["ServiceDown"] == "4s"
    assert fors["ServiceErrorRateHigh"] == fors["CustomerErrorsHigh"] == "5s"
    # The kubernetes backend gives one delay: the error ratios take it too.
    k8s = {r["alert"]: r.get("for") for g in _env_shop_rules("30s")["groups"] for r in g["rules"]}
    assert k8s["ServiceErrorRateHigh"] == k8s["ServiceLatencyHigh"] == "30s"


def test_operator_mode_objects_are_well_formed(rendered: Path):
    crs = {d["kind"]: d for _, d in _docs([rendered / "operator" / "observability-operator.yaml"])
           if d["apiVersion"] == "monitoring.coreos.com/v1"}
    assert set(crs) == {"PodMonitor", "ServiceMonitor", "PrometheusRule", "Prometheus", "Alertmanager"}
    run_selector = {"matchLabels": {"opsbench.io/run": "render"}}
    for key in ("podMonitorSelector", "serviceMonitorSelector", "ruleSelector"):
        assert crs["Prometheus"]["spec"][key] == run_selector
    for kind in ("PodMonitor", "PrometheusRule"):
        assert crs[kind]["metadata"]["labels"]["opsbench.io/run"] == "render"


def _pair(rendered: Path, fault: str, kind: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    d = rendered / "faults" / fault
    return (yaml.safe_load((d / f"original-{kind}-{name}.yaml").read_text()),
            yaml.safe_load((d / f"injected-{kind}-{name}.yaml").read_text()))


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_faults_change_what_they_claim(rendered: Path):
    before, after = _pair(rendered, "bad-image", "Deployment", "shipping")
    assert _pod(after)["containers"][0]["image"] == "localhost/opsbench-shop:v2.0.1-rc3"
    assert _pod(before)["containers"][0]["image"] == "localhost/opsbench-shop:current"
    _, after = _pair(rendered, "wrong-arch", "Deployment", "email")
    assert _pod(after)["containers"][0]["image"].startswith("docker.io/arm64v8/")
    _, after = _pair(rendered, "scale-zero", "Deployment", "cart")
    assert after["spec"]["replicas"] == 0
    _, after = _pair(rendered, "memory-limit", "Deployment", "checkout")
    res = _pod(after)["containers"][0]["resources"]
    assert res["limits"]["memory"] == res["requests"]["memory"] == "12Mi"
    _, after = _pair(rendered, "node-selector", "Deployment", "payment")
    assert _pod(after)["nodeSelector"] == {"opsbench.io/node-pool": "gpu-large"}
    _, after = _pair(rendered, "affinity", "Deployment", "currency")
    terms = _pod(after)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu-large"]
    _, after = _pair(rendered, "readiness", "Deployment", "ads")
    assert _pod(after)["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/ready"
    _, after = _pair(rendered, "env", "Deployment", "frontend")
    env = {e["name"]: e.get("value") for e in _pod(after)["containers"][0]["env"]}
    assert env["CATALOG_ADDR"] == "catalogue:8080"
    _, after = _pair(rendered, "init-crash", "Deployment", "recommendation")
    assert _pod(after)["initContainers"][0]["command"][-1].endswith("exit 1")
    _, after = _pair(rendered, "target-port", "Service", "payment")
    assert after["spec"]["ports"][0]["targetPort"] == 8081
    _, after = _pair(rendered, "secret", "Secret", "redis-password")
    assert base64.b64decode(after["data"]["password"]).decode() == "hunter2-rotated"
    _, after = _pair(rendered, "secret", "Deployment", "cart")
    assert after["spec"]["template"]["metadata"]["annotations"]["opsbench.io/restarted-by"] == "secret"
    netpol = yaml.safe_load((rendered / "faults" / "netpol" / "created-NetworkPolicy-opsbench-deny-catalog.yaml")
                            .read_text())
    assert netpol["spec"]["ingress"] == [] and netpol["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "catalog"}
    quota = yaml.safe_load((rendered / "faults" / "quota" / "created-ResourceQuota-opsbench-quota.yaml").read_text())
    assert quota["spec"]["hard"] == {"pods": "0"}


def test_removal_forgets_the_state(rendered: Path):
    # The playbook's remove step asserted restore(inject(x)) == x for every patched object and
    # deleted each fault's state file.
    state = rendered / "run" / "state" / "faults"
    assert state.is_dir() and list(state.iterdir()) == []
