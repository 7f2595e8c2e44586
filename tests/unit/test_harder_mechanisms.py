"""The five mechanisms of issue 34's third part, offline: what their effect models derive (who is the root cause,
which healthy dependency raises nothing, which alerts are sure), the environment bounds `opsbench validate` puts on
their arguments, and the log flood's trace writer (appends, keeps trying on a full disk, stops on SIGTERM). The fault
proxy's `tls` mode and segment rule are tested with the proxy (test_podman_control.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.arglimits import limit_problems
from orchestrator.catalog import find_scenario
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.generation.effects import Topology, derive, load_effect_model
from orchestrator.generation.instances import distractor_targets
from orchestrator.role_topology import load_topology

TOPO_DATA = load_topology("shop") or {}
TOPO = Topology(TOPO_DATA)
WRITER = paths.ROLES_DIR / "fault_app_log_flood" / "files" / "trace_writer.py"


def truth(role: str, args: dict[str, Any]) -> dict[str, Any]:
    model = load_effect_model(role)
    return derive(model, model.target_in(args), TOPO, args.get(model.source_arg) if model.source_arg else None, args)


def alerts(d: dict[str, Any]) -> set[tuple[str, str]]:
    return {(a["name"], a["entity"]) for a in d["alerts"]}


def test_a_tls_mismatch_blames_the_plain_client_and_spares_the_tls_listener() -> None:
    d = truth("fault_network_tls_mismatch", {"source": "checkout", "target": "payment"})
    root = d["entities"][0]
    assert (root["id"], root["faultType"], root["layer"], root["rootCause"]) == (
        "checkout", "tls_mismatch", "network", True)
    assert (d["propagations"][0]["source"], d["propagations"][0]["target"]) == ("checkout", "payment")
    assert alerts(d) == {("ServiceErrorRateHigh", "checkout")}, "only the client's own alert is sure"
    assert "payment" in {e["id"] for e in d["entities"][1:]} and not any(e.get("rootCause") for e in d["entities"][1:])


def test_an_mtu_black_hole_is_on_the_path_and_reaches_the_users() -> None:
    d = truth("fault_network_mtu_blackhole", {"source": "frontend", "target": "catalog", "max_bytes": 1200})
    assert d["entities"][0]["id"] == "catalog" and d["entities"][0]["faultType"] == "mtu_blackhole"
    assert alerts(d) == {("ServiceErrorRateHigh", "frontend"), ("CustomerErrorsHigh", "gateway")}
    assert not any(a["entity"].startswith("catalog") for a in d["alerts"]), "the catalog's own metrics see 200s"


def test_a_segment_failure_raises_nothing_on_the_dependency() -> None:
    d = truth("fault_http_segment_degrade", {"source": "frontend", "target": "currency"})
    assert d["entities"][0]["id"] == "currency" and d["entities"][0]["faultType"] == "segment_degraded"
    assert ("ServiceErrorRateHigh", "frontend") in alerts(d)
    assert not any(a["entity"].startswith("currency") for a in d["alerts"])


@pytest.mark.parametrize("target", ["checkout", "recommendation"])
def test_a_short_client_timeout_is_the_callers_configuration(target: str) -> None:
    d = truth("fault_config_client_timeout", {"target": target, "seconds": 0.002})
    root = d["entities"][0]
    assert (root["id"], root["layer"], root["faultType"]) == (target, "configuration", "timeout_misconfigured")
    assert alerts(d) == {("ServiceErrorRateHigh", target)}


def test_a_log_flood_blames_the_instance_whose_disk_it_fills() -> None:
    d = truth("fault_app_log_flood", {"target": "email"})
    assert (d["entities"][0]["id"], d["entities"][0]["faultType"]) == ("email-1", "log_flood")
    assert alerts(d) == {("ServiceErrorRateHigh", "email")}


def problems(role: str, args: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in limit_problems("spec.yaml", 0, role, args, TOPO_DATA, {})]


@pytest.mark.parametrize(("role", "args", "where", "says"), [
    ("fault_config_client_timeout", {"seconds": 0.5}, "$.faults[0].args.seconds", "above the environment's maximum"),
    ("fault_config_client_timeout", {"seconds": 0.0001}, "$.faults[0].args.seconds", "below the environment's minimum"),
    ("fault_network_mtu_blackhole", {"source": "frontend", "target": "catalog", "max_bytes": 200},
     "$.faults[0].args.max_bytes", "below the environment's minimum 576"),
    ("fault_network_mtu_blackhole", {"source": "cart", "target": "catalog", "max_bytes": 1200},
     "$.faults[0].args.target", "cart does not call catalog in this environment"),
    ("fault_network_tls_mismatch", {"source": "frontend", "target": "payment"}, "$.faults[0].args.target",
     "frontend does not call payment in this environment"),
    ("fault_http_segment_degrade", {"source": "frontend", "target": "currency", "segment_re": "to=(JPY"},
     "$.faults[0].args.segment_re", "is not a regular expression"),
    ("fault_app_log_flood", {"rate_kb": 4}, "$.faults[0].args.rate_kb", "below the environment's minimum 16"),
])
def test_arguments_beyond_the_environment_are_refused(role: str, args: dict[str, Any], where: str, says: str) -> None:
    found = problems(role, args)
    assert any(p.startswith(where) and says in p for p in found), found


def test_the_default_arguments_are_within_the_environment() -> None:
    for role, args in [("fault_config_client_timeout", {"seconds": 0.002}),
                       ("fault_network_mtu_blackhole", {"source": "frontend", "target": "catalog", "max_bytes": 1200}),
                       ("fault_network_tls_mismatch", {"source": "frontend", "target": "cart"}),
                       ("fault_http_segment_degrade", {"source": "frontend", "target": "currency",
                                                       "segment_re": "(^|&)to=(JPY|GBP|CAD)(&|$)"}),
                       ("fault_app_log_flood", {"rate_kb": 256})]:
        assert problems(role, args) == [], role


def start_writer(tmp_path: Path, target: Path) -> tuple[subprocess.Popen[bytes], Path]:
    pidfile = tmp_path / "writer.pid"
    proc = subprocess.Popen([sys.executable, str(WRITER), str(target), "64", str(pidfile)])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    return proc, pidfile


def test_the_trace_writer_appends_records_its_pid_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "transport-trace.log"
    proc, pidfile = start_writer(tmp_path, log)
    try:
        assert int(pidfile.read_text()) == proc.pid
        for _ in range(100):
            if log.exists() and log.stat().st_size > 0:
                break
            time.sleep(0.05)
        first = log.read_text().splitlines()[0]
        assert " TRACE smtp.transport session=00000000 state=EHLO " in first
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(10) == 0


def test_the_trace_writer_keeps_trying_when_it_cannot_write(tmp_path: Path) -> None:
    """A write that fails (here: the log's path is a directory, as ENOSPC on a full disk) does not stop the writer:
    deleting the log without turning the trace off lets it fill the disk again."""
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    proc, _ = start_writer(tmp_path, blocked)
    try:
        time.sleep(0.3)
        assert proc.poll() is None, "the writer gave up after a failed write"
        blocked.rmdir()
        for _ in range(100):
            if blocked.is_file() and blocked.stat().st_size > 0:
                break
            time.sleep(0.05)
        assert blocked.is_file() and blocked.stat().st_size > 0, "the writer did not write again once it could"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(10) == 0


NEW_ROLES = {"fault_network_tls_mismatch", "fault_network_mtu_blackhole", "fault_http_segment_degrade",
             "fault_config_client_timeout", "fault_app_log_flood"}


def distractor_scenarios(roles: set[str]) -> list[str]:
    """The scenarios over `roles` that carry a distractor (single-cause and two-cause incidents)."""
    out = []
    for spec in sorted(paths.SPECS_DIR.glob("*/scenario.yaml")):
        data = yaml.safe_load(spec.read_text())
        faults = data.get("faults") or []
        if any(f.get("distractor") for f in faults) and {f["role"] for f in faults} & roles:
            out.append(data["metadata"]["id"])
    return out


def _with_distractor() -> list[str]:
    return distractor_scenarios(set(NEW_ROLES))


def test_most_new_scenarios_carry_a_distractor() -> None:
    assert len(_with_distractor()) >= 15


@pytest.mark.parametrize("scenario", _with_distractor())
def test_naming_the_distractor_as_the_cause_scores_lower(scenario: str, tmp_path: Path) -> None:
    check_blaming_the_distractor_scores_lower(scenario, tmp_path)


def check_blaming_the_distractor_scores_lower(scenario: str, tmp_path: Path) -> None:
    """A scripted agent that blames the distractor instead of the true causes loses localisation and counts a false
    positive; one that names the true causes does not."""
    scn = find_scenario(scenario)
    gt = yaml.safe_load(scn.ground_truth_path.read_text())
    decoys = distractor_targets(scn.faults)
    assert len(decoys) == 1 and {e["id"]: e.get("rootCause") for e in gt["entities"]}[decoys[0]] is False
    roots = [e["id"] for e in gt["entities"] if e.get("rootCause")]
    chain = [{"source": p["source"], "target": p["target"]} for p in gt["propagations"]]
    symptoms = [{"id": e["id"], "root_cause": False} for e in gt["entities"]
                if not e.get("rootCause") and e["id"] != decoys[0]]
    right = {"incident": True, "entities": [*({"id": r, "root_cause": True} for r in roots), *symptoms],
             "propagations": chain}
    fooled = {"incident": True, "entities": [{"id": decoys[0], "root_cause": True}, *symptoms],
              "propagations": [{"source": decoys[0], "target": chain[0]["target"]}, *chain[1:]]}
    scores = {}
    for name, output in (("right", right), ("fooled", fooled)):
        (tmp_path / f"{name}.json").write_text(json.dumps(output))
        scores[name] = score_diagnosis(tmp_path / f"{name}.json", gt, TOPO_DATA, distractors=decoys)
    assert scores["right"]["fl_pass"] == 1.0 and scores["right"]["distractor_blamed"] == 0.0
    assert scores["right"]["false_positives"] == 0
    assert scores["fooled"]["fl_pass"] == 0.0 and scores["fooled"]["distractor_blamed"] == 1.0
    assert scores["fooled"]["false_positives"] == 1 and scores["fooled"]["ntam_fl"] < scores["right"]["ntam_fl"]
