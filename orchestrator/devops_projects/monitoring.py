"""Monitoring tasks beside a real upstream project (issue 37, family ``monitoring``).

The hand-written ``devops-monitor-<anomaly>`` scenarios (one per anomaly of ``fault_workspace_process``) are the
templates: a generated instance is one of them moved into a workspace that holds one fetched upstream project
instead of the written ones, with the misbehaving program drawn among the workspace's background services. None of
the catalogue's projects ships services of its own (they are libraries), so the anomaly runs beside the project: the
healthy services read the project's tree under /workspace as they read the written projects'.

A candidate is (anomaly, culprit) over the seven anomalies and the seven services of the role's defaults (the
topology's process entities, so the ground truth's root cause is an entity of the run's topology); the seed orders
them per project (`tasks.draw_order`), and a project gets each anomaly at most once.

A drawn candidate is kept only when proven live in a throwaway container of the workspace image (the workspace's
limits, no network, the project's tree mounted read-only at /workspace/<id>, every process at nice 19): the
scenario's baseline check holds before, the services start as the fault role starts them (its own servicectl.sh and
service.py), the manifestation check holds within its timeout, the same check aimed at each healthy service fails
(the anomaly marks the culprit alone), the stop leaves no process and no file, and `evaluate_diagnosis`'s scoring
fails the untouched state (no diagnosis) and a wrong culprit and passes the reference diagnosis.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects.check import WORKSPACE_IMAGE, WORKSPACE_LIMITS, WORKSPACE_UID
from orchestrator.devops_projects.fetch import Cache
from orchestrator.devops_projects.run import language_meta
from orchestrator.devops_projects.tasks import Draw, Host, Instance, Report, draw_order, instance_id, skipped

ROLE = paths.ROLES_DIR / "fault_workspace_process"
TEMPLATES = paths.SPECS_DIR
ANOMALIES = ("memory_leak", "cpu_spin", "fd_leak", "disk_fill", "zombie_storm", "io_hog", "thread_explosion")
SERVICE_DIR = "/home/dev/.local/share/services"
"""Where the role puts the programs (its vars: the workspace user's home; the image's user is dev)."""


def services() -> list[str]:
    """The background services every injection starts (the role's defaults, the topology's processes)."""
    data = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    return list(data["fault_workspace_process_services"])


@dataclass(frozen=True)
class Candidate:
    anomaly: str
    name: str

    def describe(self) -> str:
        return f"{self.anomaly} in {self.name}"


def candidates() -> list[Candidate]:
    """Every (anomaly, culprit) pair in a fixed order (the seed shuffles it)."""
    return [Candidate(a, n) for a in ANOMALIES for n in services()]


def template(anomaly: str, root: Path = TEMPLATES) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario.yaml, ground_truth.yaml) of the hand-written scenario of this anomaly."""
    folder = root / f"devops-monitor-{anomaly.replace('_', '-')}"
    if not (folder / "scenario.yaml").is_file():
        raise FileNotFoundError(f"{folder}/scenario.yaml: no hand-written monitoring scenario for anomaly {anomaly}")
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    truth = yaml.safe_load((folder / "ground_truth.yaml").read_text())
    if scenario["faults"][0]["args"].get("anomaly") != anomaly:
        raise ValueError(f"{folder}/scenario.yaml: faults[0].args.anomaly is not {anomaly}")
    return scenario, truth


def swap_names(doc: Any, old: str, new: str) -> Any:
    """`doc` with the program names `old` and `new` exchanged wherever they stand as whole names (a text that names
    the other services keeps naming each of them once)."""
    if old == new:
        return copy.deepcopy(doc)
    text = json.dumps(doc)
    marker = "@@opsbench-swap@@"

    def sub(a: str, b: str, s: str) -> str:
        return re.sub(rf"(?<![a-z0-9-]){re.escape(a)}(?![a-z0-9-])", b.replace("\\", r"\\"), s)

    text = sub(old, marker, text)
    text = sub(new, old, text)
    text = text.replace(marker, new)
    return json.loads(text)


def scenario_docs(project: cat.Project, cand: Candidate, seed: str, tests: int = 0,
                  root: Path = TEMPLATES) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario.yaml, ground_truth.yaml) of a candidate beside `project`: the anomaly's template with the culprit
    renamed, the workspace holding the upstream project alone, the checks run in that project."""
    scenario, truth = template(cand.anomaly, root)
    old = scenario["faults"][0]["args"]["name"]
    scenario, truth = swap_names(scenario, old, cand.name), swap_names(truth, old, cand.name)
    iid = instance_id("monitoring", project.id, cand.describe())
    meta = scenario["metadata"]
    meta.update({
        "id": iid, "generated": True,
        "name": f"{meta['name']} beside {project.id}",
        "description": (f"Generated beside the upstream project {project.id} ({project.language}) from "
                        f"devops-monitor-{cand.anomaly.replace('_', '-')}: {meta['description']} Proven live in "
                        "the workspace image: the anomaly shows on the culprit alone, the reference diagnosis "
                        "passes, a missing or wrong one fails, nothing is left."),
        "tags": [*dict.fromkeys([*meta.get("tags", []), project.id, "generated"])]})
    from orchestrator.complexity import complexity_level, complexity_value

    cx = meta["complexity"]
    cx["technologies"] = [*dict.fromkeys([*cx["technologies"], project.language])]
    cx["value"] = complexity_value(cx["propagationLength"], cx["resolutionSteps"], len(cx["technologies"]))
    cx["level"] = complexity_level(cx["value"])
    scenario["environment"] = {"backend": "local", "application": "workspace",
                               "args": {"projects": [], "upstream": [{"id": project.id,
                                                                      **language_meta(project.language, tests)}]}}
    scenario["faults"][0]["args"] = {"name": cand.name, "anomaly": cand.anomaly}
    for phase in ("baseline", "manifestation"):
        for check in scenario["checks"].get(phase, []):
            check["args"]["project"] = project.id
    truth["scenario"] = iid
    return scenario, truth


def reference_output(scenario: dict[str, Any]) -> dict[str, Any]:
    return dict(scenario["reference"][0]["args"]["output"])


def score(truth: dict[str, Any], output: dict[str, Any] | None, work: Path) -> float:
    """evaluate_diagnosis's fl_pass of an output (None: the agent wrote nothing)."""
    from orchestrator.evaluation.diagnosis import score_diagnosis

    path = None
    if output is not None:
        path = work / f"output-{secrets.token_hex(3)}.json"
        path.write_text(json.dumps(output))
    return float(score_diagnosis(path, truth)["fl_pass"])


def proof_by_scoring(scenario: dict[str, Any], truth: dict[str, Any], work: Path) -> tuple[str, dict[str, Any]]:
    """The offline half of the proof: the untouched state (no diagnosis) and a diagnosis that names a healthy
    service fail, the reference passes."""
    ref = reference_output(scenario)
    culprit = scenario["faults"][0]["args"]["name"]
    other = next(s for s in services() if s != culprit)
    wrong = swap_names(ref, culprit, other)
    scores = {"untouched": score(truth, None, work), "wrong_culprit": score(truth, wrong, work),
              "reference": score(truth, ref, work)}
    if scores["untouched"] or scores["wrong_culprit"]:
        return "the diagnosis scoring passes an answer that is not the culprit's", scores
    if scores["reference"] != 1.0:
        return "the reference diagnosis does not pass evaluate_diagnosis", scores
    return "", scores


class LiveProver:
    """The live half of the proof, in one throwaway container of the workspace image per candidate."""

    def __init__(self, project: cat.Project, cache: Cache, image: str = WORKSPACE_IMAGE) -> None:
        self.project, self.cache, self.image = project, cache, image
        conf = paths.containers_conf_dir()
        self.env = {**os.environ, **{k: str(conf / f) for k, f in (("CONTAINERS_CONF", "containers.conf"),
                                                                   ("CONTAINERS_STORAGE_CONF", "storage.conf"))
                                     if (conf / f).is_file()}}

    def _podman(self, argv: list[str], timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(["nice", "-n", "19", "podman", *argv], env=self.env, input=stdin,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, -1, "", f"timed out after {timeout:g} s")

    def _sh(self, name: str, command: str, timeout: float = 60, stdin: str | None = None,
            args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        return self._podman(["exec", *(["--interactive"] if stdin is not None else []),
                             f"--user={WORKSPACE_UID}:{WORKSPACE_UID}", f"--workdir=/workspace/{self.project.id}",
                             name, "nice", "-n", "19", "sh", "-c", command, *args], timeout, stdin)

    def prove(self, scenario: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """('' when proven, else why not, the figures)."""
        fault = scenario["faults"][0]["args"]
        culprit, anomaly = fault["name"], fault["anomaly"]
        names = sorted({*services(), culprit})
        baseline = scenario["checks"]["baseline"][0]
        manifest = scenario["checks"]["manifestation"][0]
        ctl = (ROLE / "files" / "servicectl.sh").read_text()
        program = (ROLE / "files" / "service.py").read_text()
        name = f"ob-devops-monitor-{secrets.token_hex(4)}"
        proof: dict[str, Any] = {}
        where = f"/workspace/{self.project.id}"
        started = self._podman(
            ["run", "--detach", f"--name={name}", "--network=none", *WORKSPACE_LIMITS, "--init",
             "--security-opt=no-new-privileges", f"--user={WORKSPACE_UID}:{WORKSPACE_UID}",
             "--tmpfs=/tmp:rw,nosuid,nodev,size=512m,mode=1777",
             f"--mount=type=bind,source={self.cache.tree(self.project).resolve()},destination={where},ro",
             f"--workdir={where}", self.image, "sleep", "infinity"], 120)
        if started.returncode != 0:
            return f"cannot start a workspace container: {started.stderr.strip()[-300:]}", proof
        try:
            base = self._sh(name, baseline["args"]["command"], baseline.get("timeout", 30))
            if base.returncode != 0:
                return f"the baseline check does not hold before the services start: {base.stdout[-200:]}", proof
            t0 = time.monotonic()
            start = self._sh(name, ctl, 120, program, ("servicectl", "start", SERVICE_DIR, culprit, anomaly, *names))
            if start.returncode != 0:
                return f"the services do not start: {(start.stderr or start.stdout).strip()[-300:]}", proof
            deadline = t0 + float(manifest.get("timeout", 90))
            tries = 0
            while True:
                tries += 1
                shown = self._sh(name, manifest["args"]["command"], 60)
                if shown.returncode == 0 or time.monotonic() >= deadline:
                    break
                time.sleep(3)
            proof["manifestation"] = {"ok": shown.returncode == 0, "tries": tries,
                                      "seconds": round(time.monotonic() - t0, 1)}
            if shown.returncode != 0:
                return (f"the anomaly does not show within {manifest.get('timeout', 90)} s "
                        f"({shown.stdout.strip()[-200:] or 'the check fails'})"), proof
            marked = [other for other in names if other != culprit
                      and self._sh(name, swap_names(manifest["args"]["command"], culprit, other), 60).returncode == 0]
            proof["healthy_marked"] = marked
            if marked:
                return f"the manifestation check holds for healthy services too: {', '.join(marked)}", proof
            stop = self._sh(name, ctl, 60, None, ("servicectl", "stop", SERVICE_DIR, *names))
            left = self._sh(name, f"pgrep -f '^/usr/bin/python3 {SERVICE_DIR}/bin/' || pgrep -x "
                                  f"'{'|'.join(names)}' || test -e {SERVICE_DIR} || test -e /tmp/services", 30)
            proof["stopped"] = {"rc": stop.returncode, "leftovers": left.returncode == 0}
            if stop.returncode != 0 or left.returncode == 0:
                return f"the stop leaves processes or files behind: {(stop.stderr or left.stdout).strip()[-200:]}", \
                    proof
            return "", proof
        finally:
            self._podman(["rm", "-f", "-t", "0", name], 60)


def generate(host: Host, report: Report, count: int, max_draws: int, prover: LiveProver | None = None,
             root: Path = TEMPLATES) -> None:
    """Draw monitoring candidates for host.project in the seed's order (each anomaly once), prove each, keep the
    proven ones as instances (their scenario documents in `Instance.docs`)."""
    project = host.project
    report.where = "workspace"  # the live proof runs in the workspace image, wherever the edit families' run
    prover = prover or LiveProver(project, host.cache)
    pool = candidates()
    report.candidates = len(pool)
    tests = int(cat.load_measured().get(project.id, {}).get("workspace", {}).get("passed", 0))
    done: set[str] = set()
    for cand in draw_order(pool, host.seed, project.id, "monitoring"):
        if len(report.instances) >= count or len(report.draws) >= max_draws:
            break
        if cand.anomaly in done:
            continue
        draw = Draw("monitoring", project.id, cand.describe())
        report.draws.append(draw)
        if skipped(host, draw):
            continue
        t0 = time.monotonic()
        scenario, truth = scenario_docs(project, cand, host.seed, tests, root)
        with tempfile.TemporaryDirectory() as tmp:
            why, scores = proof_by_scoring(scenario, truth, Path(tmp))
        proof: dict[str, Any] = {"scores": scores}
        if not why:
            why, live = prover.prove(scenario)
            proof.update(live)
        draw.verify_s = round(time.monotonic() - t0, 2)
        if why:
            draw.reason = f"verify: {why}"
            continue
        iid = scenario["metadata"]["id"]
        report.instances.append(Instance(
            iid, "monitoring", project.id, project.language, scenario["metadata"]["name"],
            scenario["tasks"][0]["goal"], [], {"task": "diagnose", "kind": "diagnose"}, [],
            provenance={"anomaly": cand.anomaly, "culprit": cand.name, "seed": host.seed,
                        "template": f"devops-monitor-{cand.anomaly.replace('_', '-')}", "pristine_tests": tests},
            proof=proof, docs=(scenario, truth)))
        draw.kept, draw.instance = True, iid
        done.add(cand.anomaly)
        host.say(f"{project.id}: kept {iid} ({cand.describe()})")
