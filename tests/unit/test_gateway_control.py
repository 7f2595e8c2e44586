"""Control backends: PodmanControl's podman commands (subprocess mocked, no container is touched) and the flags file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gateway_fixtures import PREFIX, RUN_ID, TOKEN, Clock, make_run_dir

from orchestrator.gateway import Gateway, GatewayOptions, PodmanControl, ToolError, load_context
from orchestrator.gateway.control import set_flag_variant


def container(name: str, entity: str | None, service: str | None, run: str = RUN_ID,
              state: str = "running", **labels: str) -> dict[str, Any]:
    all_labels = {"opsbench.run": run, **labels}
    if entity:
        all_labels["opsbench.entity"] = entity
    if service:
        all_labels["opsbench.service"] = service
    return {"Names": [name], "Labels": all_labels, "State": state, "Status": "Up 2 minutes"}


PS = [
    container(f"{PREFIX}checkout-1", "checkout-1", "checkout"),
    container(f"{PREFIX}frontend-1", "frontend-1", "frontend"),
    container(f"{PREFIX}frontend-2", "frontend-2", "frontend", state="exited"),
    container(f"{PREFIX}prometheus", "prometheus", "prometheus"),
    container(f"{PREFIX}loadgen-1", "loadgen-1", "loadgen"),
    container(f"{PREFIX}redis-exporter", "redis-exporter", "redis-exporter"),
    container(f"{PREFIX}fault-slow", None, None, **{"opsbench.fault": "slow"}),
    # A helper that wears an application name is still a fault's container.
    container(f"{PREFIX}checkout-9", "checkout-9", "checkout", **{"opsbench.fault": "sneaky"}),
    container("ob-r2-checkout-1", "checkout-1", "checkout", run="r2"),
]

INSPECT = {
    "Name": f"{PREFIX}checkout-1", "RestartCount": 2, "ImageName": "localhost/opsbench-shop:current",
    "State": {"Status": "running", "Running": True, "Paused": False, "OOMKilled": True, "ExitCode": 137,
              "StartedAt": "2024-05-01T12:00:00Z"},
    "Config": {"Env": ["SHOP_SERVICE=checkout", "PG_PASSWORD=hunter2", "API_TOKEN=abc"],
               "Cmd": ["python3", "-m", "shop"], "Labels": {"opsbench.overrides": '{"memory": "12m"}'}},
    "HostConfig": {"Memory": 12582912, "NanoCpus": 500000000, "RestartPolicy": {"Name": "on-failure"}},
}


class FakePodman:
    """Stands in for subprocess.run: records each podman command and answers like podman would."""

    def __init__(self, fail: str | None = None, ps: list[dict[str, Any]] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str]] = []
        self.fail = fail
        self.ps = PS if ps is None else ps

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "podman"
        assert kwargs["timeout"] > 0 and kwargs["capture_output"] and kwargs["text"]
        assert Path(kwargs["cwd"]).name == "opsbench-conmon"  # never the project's tree: conmon writes there
        self.calls.append(argv)
        self.envs.append(kwargs["env"])
        verb = argv[1] if argv[1] != "container" else argv[2]
        if verb == self.fail:
            return subprocess.CompletedProcess(argv, 125, "", "Error: no such container")
        out = {"ps": json.dumps(self.ps), "inspect": json.dumps([INSPECT]), "restart": "\n".join(argv[2:]),
               "rm": "", "run": "c0ffee", "start": argv[-1], "stop": argv[-1]}[verb]
        return subprocess.CompletedProcess(argv, 0, out, "")


CONF = {"CONTAINERS_CONF": "/x/containers.conf", "CONTAINERS_STORAGE_CONF": "/x/storage.conf"}


def podman_control(podman: FakePodman, flags: Path | None = None) -> PodmanControl:
    return PodmanControl(RUN_ID, PREFIX, flags, runner=podman, env=CONF)


def test_list_shows_only_the_application() -> None:
    podman = FakePodman()
    services = podman_control(podman).list_services()
    assert podman.calls == [["podman", "ps", "-a", "--filter", f"label=opsbench.run={RUN_ID}", "--format", "json"]]
    assert podman.envs[0]["CONTAINERS_CONF"] == "/x/containers.conf"
    assert services == [
        {"service": "checkout", "instances": [{"id": "checkout-1", "state": "running", "status": "Up 2 minutes"}]},
        {"service": "frontend", "instances": [{"id": "frontend-1", "state": "running", "status": "Up 2 minutes"},
                                              {"id": "frontend-2", "state": "exited", "status": "Up 2 minutes"}]},
    ]


def test_restart_commands() -> None:
    podman = FakePodman()
    control = podman_control(podman)
    assert control.restart("frontend") == {"service": "frontend", "restarted": ["frontend-1", "frontend-2"]}
    assert podman.calls[-1] == ["podman", "restart", f"{PREFIX}frontend-1", f"{PREFIX}frontend-2"]
    assert control.restart("frontend", f"{PREFIX}frontend-2")["restarted"] == ["frontend-2"]
    assert podman.calls[-1] == ["podman", "restart", f"{PREFIX}frontend-2"]
    control.restart("checkout")
    assert podman.calls[-1] == ["podman", "restart", f"{PREFIX}checkout-1"]  # never the fault's checkout-9


@pytest.mark.parametrize(("service", "instance", "code"), [
    ("prometheus", None, "denied"),
    ("loadgen", None, "denied"),
    ("redis-exporter", None, "denied"),
    ("checkout", "fault-slow", "denied"),
    ("checkout", "checkout-9", "not_found"),  # labelled opsbench.fault: not an instance of the application
    ("checkout", "frontend-1", "not_found"),
    ("nothing", None, "not_found"),
])
def test_restart_refuses_anything_but_the_application(service: str, instance: str | None, code: str) -> None:
    podman = FakePodman()
    with pytest.raises(ToolError) as err:
        podman_control(podman).restart(service, instance)
    assert err.value.code == code
    assert not [c for c in podman.calls if c[1] == "restart"]


def test_describe_redacts_secrets_and_hides_labels() -> None:
    podman = FakePodman()
    described = podman_control(podman).describe_service("checkout")
    assert podman.calls[-1] == ["podman", "container", "inspect", f"{PREFIX}checkout-1"]
    (inst,) = described["instances"]
    assert inst["env"] == {"SHOP_SERVICE": "checkout", "PG_PASSWORD": "[redacted]", "API_TOKEN": "[redacted]"}
    assert (inst["oom_killed"], inst["exit_code"], inst["restarts"]) == (True, 137, 2)
    assert (inst["memory_limit_bytes"], inst["cpus"], inst["restart_policy"]) == (12582912, 0.5, "on-failure")
    assert "overrides" not in json.dumps(described)  # a fault's bookkeeping label must not leak


def test_podman_failure_is_backend_error() -> None:
    with pytest.raises(ToolError) as err:
        podman_control(FakePodman(fail="restart")).restart("checkout")
    assert err.value.code == "backend_error" and "no such container" in err.value.message


def test_recreating_needs_the_recorded_specs() -> None:
    control = podman_control(FakePodman())
    for call in (lambda: control.scale("checkout", 2), lambda: control.rollback("checkout")):
        with pytest.raises(ToolError) as err:
            call()
        assert err.value.code == "not_supported"  # without env/containers.json there is nothing to build from


SPECS = {"common": {"prefix": PREFIX.rstrip("-"), "network": "ob-net", "memory": "256m",
                    "labels": {"opsbench.run": RUN_ID}, "volumes": []},
         "containers": [{"id": "checkout-1", "service": "checkout", "image": "localhost/opsbench-shop:current",
                         "env": {"SHOP_SERVICE": "checkout", "PAYMENT_ADDR": "payment:8080"},
                         "command": ["python3", "-m", "shop"]},
                        {"id": "prometheus", "service": "prometheus", "image": "localhost/opsbench-infra:x"}]}


def spec_control(podman: FakePodman, tmp_path: Path) -> PodmanControl:
    (tmp_path / "containers.json").write_text(json.dumps(SPECS))
    return PodmanControl(RUN_ID, PREFIX, None, runner=podman, env=CONF, spec_file=tmp_path / "containers.json")


def test_rollback_recreates_each_instance_exactly_as_deployed(tmp_path: Path) -> None:
    podman = FakePodman()
    result = spec_control(podman, tmp_path).rollback("checkout")
    assert result["rolled_back"] == ["checkout-1"]
    rm, run = podman.calls
    assert rm == ["podman", "rm", "--force", "--ignore", "--time", "1", f"{PREFIX}checkout-1"]
    assert run[:6] == ["podman", "run", "-d", "--name", f"{PREFIX}checkout-1", "--hostname"]
    assert "PAYMENT_ADDR=payment:8080" in run and run[-3:] == ["python3", "-m", "shop"]
    assert not any(a.startswith("opsbench.overrides") for a in run)  # as deployed: no overrides label


def test_set_env_keeps_earlier_changes_and_records_them(tmp_path: Path) -> None:
    podman = FakePodman()  # inspect answers a container that already carries {"memory": "12m"}
    spec_control(podman, tmp_path).set_env("checkout", {"PAYMENT_ADDR": "payment:9090"})
    run = podman.calls[-1]
    assert "PAYMENT_ADDR=payment:9090" in run and "SHOP_SERVICE=checkout" in run
    assert run[run.index("--memory") + 1] == "12m"
    label = next(a for a in run if a.startswith("opsbench.overrides="))
    assert json.loads(label.split("=", 1)[1]) == {"env": {"PAYMENT_ADDR": "payment:9090"}, "memory": "12m"}


def test_recreating_the_machinery_is_denied(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as err:
        spec_control(FakePodman(), tmp_path).rollback("prometheus")
    assert err.value.code == "denied"


def test_toggle_flag_edits_the_flags_file(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, "http://127.0.0.1:9")
    flags_file = run_dir / "env" / "flags" / "flags.json"
    control = podman_control(FakePodman(), flags_file)
    before = json.loads(flags_file.read_text())["flags"]

    assert control.toggle_flag("paymentServiceFailure", on=False) == {
        "flag": "paymentServiceFailure", "previous": "on", "current": "off"}
    after = json.loads(flags_file.read_text())["flags"]
    assert after["paymentServiceFailure"] == {**before["paymentServiceFailure"], "defaultVariant": "off"}
    assert {k: v for k, v in after.items() if k != "paymentServiceFailure"} == {
        k: v for k, v in before.items() if k != "paymentServiceFailure"}
    assert oct(flags_file.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in flags_file.parent.iterdir()] == ["flags.json"]  # no temp file left behind

    assert control.toggle_flag("cartServiceFailure", on=True)["current"] == "on"
    with pytest.raises(ToolError) as err:
        control.toggle_flag("loadgeneratorFloodHomepage", on=True)
    assert err.value.code == "denied"
    with pytest.raises(ToolError) as err:
        control.toggle_flag("noSuchFlag", on=True)
    assert err.value.code == "not_found" and "cartServiceFailure" in err.value.message
    assert "loadgenerator" not in err.value.message
    assert control.list_flags() == ["cartServiceFailure", "paymentServiceFailure"]


def test_set_flag_variant_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    path.write_text(json.dumps({"flags": {"f": {"state": "ENABLED", "variants": {"on": 1, "off": 0},
                                                "defaultVariant": "off"}}}))
    mtime = path.stat().st_mtime_ns
    assert set_flag_variant(path, "f", "off") == ("off", "off")
    assert path.stat().st_mtime_ns == mtime  # unchanged: not rewritten


def test_local_environment_gets_podman_control_through_the_gateway(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, "http://127.0.0.1:9")
    ctx = load_context(run_dir, GatewayOptions())
    assert isinstance(ctx.control, PodmanControl)
    assert ctx.control.prefix == PREFIX and ctx.control.run_id == RUN_ID
    podman = FakePodman()
    ctx.control._run = podman
    ctx.control._env = CONF
    ctx.clock = Clock()
    gw = Gateway(ctx)
    outcome = gw.call("restart", {"service": "frontend", "instance": "frontend-1"})
    assert outcome.ok and podman.calls[-1] == ["podman", "restart", f"{PREFIX}frontend-1"]
    outcome = gw.call("toggle_flag", {"flag": "paymentServiceFailure", "state": "off"})
    assert outcome.ok and outcome.result["previous"] == "on"
    assert ctx.current_token() == TOKEN


def test_flags_file_outside_the_run_is_not_served(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, "http://127.0.0.1:9")
    env = json.loads((run_dir / "environment.json").read_text())
    env["control"]["flags_file"] = str(tmp_path / "elsewhere.json")
    env["telemetry"] = "/var/log"
    (run_dir / "environment.json").write_text(json.dumps(env))
    ctx = load_context(run_dir, GatewayOptions())
    assert isinstance(ctx.control, PodmanControl) and ctx.control.flags_file is None
    assert ctx.telemetry_dir is None
    gw = Gateway(ctx)
    assert gw.call("toggle_flag", {"flag": "paymentServiceFailure", "state": "off"}).body()["error"]["code"] == \
        "not_supported"
    assert gw.call("search_logs", {}).body()["error"]["code"] == "not_supported"


def test_scale_up_adds_instances_that_join_the_alias_and_are_scraped(tmp_path: Path) -> None:
    podman = FakePodman()  # checkout-1 runs; checkout-9 is a fault's helper: its name is taken
    (tmp_path / "config").mkdir()
    result = spec_control(podman, tmp_path).scale("checkout", 3)
    assert result["added"] == ["checkout-10", "checkout-11"] and result["instances"][0] == "checkout-1"
    runs = [c for c in podman.calls if c[1] == "run"]
    assert len(runs) == 2
    run = runs[0]
    assert run[run.index("--name") + 1] == f"{PREFIX}checkout-10" and run[run.index("--hostname") + 1] == "checkout-10"
    assert "opsbench.scaled=checkout" in run and "opsbench.entity=checkout-10" in run
    assert "--publish" not in run and "PAYMENT_ADDR=payment:8080" in run
    # the inspected checkout-1 carries {"memory": "12m"}: the new instance is made like it is now
    assert run[run.index("--memory") + 1] == "12m"
    assert json.loads((tmp_path / "config" / "scaled_targets.json").read_text()) == []  # ps (fixed) shows none


def test_scale_down_stops_deployed_and_removes_added_instances(tmp_path: Path) -> None:
    ps = [container(f"{PREFIX}checkout-1", "checkout-1", "checkout"),
          container(f"{PREFIX}checkout-2", "checkout-2", "checkout", **{"opsbench.scaled": "checkout"}),
          container(f"{PREFIX}prometheus", "prometheus", "prometheus")]
    (tmp_path / "config").mkdir()
    podman = FakePodman(ps=ps)
    control = spec_control(podman, tmp_path)
    assert control.scale("checkout", 2)["instances"] == ["checkout-1", "checkout-2"]
    assert [c[1] for c in podman.calls if c[1] not in ("ps", "container")] == []  # already so: nothing done
    targets = json.loads((tmp_path / "config" / "scaled_targets.json").read_text())
    assert targets == [{"targets": [f"{PREFIX}checkout-2:8080"],
                        "labels": {"service": "checkout", "instance_id": "checkout-2"}}]
    podman.calls.clear()
    result = control.scale("checkout", 0)
    assert (result["stopped"], result["removed"]) == (["checkout-1"], ["checkout-2"])
    assert ["podman", "stop", "--time", "3", f"{PREFIX}checkout-1"] in podman.calls
    assert ["podman", "rm", "--force", "--time", "1", f"{PREFIX}checkout-2"] in podman.calls
    with pytest.raises(ToolError) as err:
        control.scale("prometheus", 2)
    assert err.value.code == "denied"
