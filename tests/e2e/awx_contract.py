"""The AWX contract, executed: run an exported workflow the way AWX runs it, with ansible-runner, without AWX.

Test-only (users run AWX itself; OpsBench schedules nothing of its own). What it does as AWX does, and where:

* **The objects** come from `opsbench awx export`'s playbook: its tasks are rendered with the play's variables,
  loops included, as Ansible would before calling the awx.awx modules (`!unsafe` values stay verbatim: AWX stores
  them as text and the jobs expand them). Nothing is created in an AWX server.
* **A job** (one workflow node) gets a private data dir laid out as AWX's `BaseTask.build_private_data_dir` lays
  it out: `project/` (a copy of the project checkout: the files git tracks, hard-linked from one cached copy, as
  AWX copies its project cache), `inventory/` (the inventory source imported as `ansible-inventory --list
  --export` imports it), `env/extravars`, credential files under `env/`; then `ansible_runner.run` of the job
  template's playbook, with the project as the working directory (its ansible.cfg applies).
* **Extra vars** merge as AWX's `WorkflowJobNode.get_job_kwargs` and `build_extra_vars_file` merge them, low to
  high: the job template's, the node's `extra_data` (prompted: the job templates ask for variables), the
  `set_stats` artifacts of the node's ancestors, the workflow job's (the workflow template's, then the launch's),
  the credentials' `extra_vars` injectors, then AWX's own `awx_*`/`tower_*` job variables.
* **Credentials** are injected as a custom credential type injects them: `file` templates written to files under
  `env/` (`tower.filename.<name>`), `env` templates into the job's environment, `extra_vars` templates as
  above, every template rendered with the credential's inputs.
* **Edges**: a node runs once one of its parents' edges fired (success, failure, always); a node whose parents
  all finished without firing it does not run, as AWX marks it. Nodes run one after the other (our workflows are
  chains with undo branches; AWX would run independent branches side by side).

Not as AWX: no execution-environment container (jobs run with this virtualenv's Python and this machine's podman,
with the environment variables the image sets: the job's checkout on PYTHONPATH, the host's state and podman
configuration), no AWX server, API or database, no callback receiver; the results go to OpsBench's own index
instead (`record`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner
import jinja2
import yaml
from jinja2.nativetypes import NativeEnvironment

from orchestrator import paths, store
from orchestrator.lifecycle import FORWARD
from orchestrator.runner import ansible_env, failure_text


class Verbatim(str):
    """An `!unsafe` value of the export: handed to AWX as text, expanded only by the job."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: Verbatim(loader.construct_scalar(node)))  # type: ignore[arg-type]


def _dict2items(value: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in value.items()]


def _renderer() -> NativeEnvironment:
    env = NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["dict2items"] = _dict2items
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
    env.globals["lookup"] = lambda kind, path: Path(path).expanduser().read_text() if kind.endswith("file") else ""
    return env


def render(value: Any, variables: dict[str, Any], env: NativeEnvironment | None = None) -> Any:
    """Template every string of `value` with `variables`, as Ansible templates module arguments (not Verbatim)."""
    env = env or _renderer()
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, dict):
        return {k: render(v, variables, env) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, variables, env) for v in value]
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        return env.from_string(value).render(**variables)
    return value


@dataclass
class Export:
    """The AWX objects an export playbook would create, by module and name."""

    path: Path
    variables: dict[str, Any]
    objects: dict[str, dict[str, dict[str, Any]]]

    @classmethod
    def load(cls, path: Path, overrides: dict[str, Any] | None = None) -> Export:
        play = yaml.load(path.read_text(), Loader=_Loader)[0]
        variables = {**play["vars"], **(overrides or {})}
        env = _renderer()
        objects: dict[str, dict[str, dict[str, Any]]] = {}
        for task in play["tasks"]:
            module = next(k for k in task if k.startswith("awx.awx."))
            if "launch" in (task.get("tags") or []):
                continue
            items = render(task["loop"], variables, env) if "loop" in task else [None]
            for item in items:
                args = render(task[module], {**variables, "item": item}, env)
                objects.setdefault(module.removeprefix("awx.awx."), {})[args["name"]] = args
        return cls(path, variables, objects)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        try:
            return self.objects[kind][name]
        except KeyError:
            known = sorted(self.objects.get(kind, {}))
            raise KeyError(f"{self.path}: no {kind} named {name!r} (has: {known})") from None

    def workflow(self, name: str) -> dict[str, Any]:
        return self.get("workflow_job_template", name)


@dataclass
class NodeJob:
    """One workflow node's job: its outcome, its set_stats artifacts and where it ran."""

    identifier: str
    job_id: int
    status: str  # successful | failed | error | canceled
    rc: int | None
    started: float
    ended: float
    artifacts: dict[str, Any]
    private_data_dir: Path
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "successful"


@dataclass
class WorkflowJob:
    id: int
    name: str
    extra_vars: dict[str, Any]
    jobs: list[NodeJob] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    def job(self, identifier: str) -> NodeJob | None:
        return next((j for j in self.jobs if j.identifier == identifier), None)

    @property
    def ran(self) -> list[str]:
        return [j.identifier for j in self.jobs]


class ProjectCache:
    """The project as AWX's project update leaves it: the files git tracks or would (working-tree content), copied once;
    each job gets a hard-linked copy (AWX copies its cache into the job's private data dir)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.copy = root / "project-cache"

    def ensure(self) -> Path:
        if self.copy.is_dir():
            return self.copy
        # Tracked and new, not ignored: the checkout a commit of this working tree would give.
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=paths.PROJECT_ROOT, capture_output=True, check=True)
        staging = self.root / "project-cache.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        for rel in filter(None, listed.stdout.decode().split("\0")):
            src = paths.PROJECT_ROOT / rel
            if not src.is_file():
                continue  # deleted in the working tree
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        staging.replace(self.copy)
        return self.copy

    def checkout(self, dest: Path) -> None:
        subprocess.run(["cp", "-al", str(self.ensure()), str(dest)], check=True)


def import_inventory(project: Path, source_path: str) -> dict[str, Any]:
    """An SCM inventory source as AWX's inventory update imports it (`ansible-inventory --list --export`)."""
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(project / source_path),
                           "--list", "--export"], cwd=project, env={**ansible_env(), "ANSIBLE_CONFIG": ""},
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def inject_credential(ctype: dict[str, Any], inputs: dict[str, Any], env_dir: Path,
                      ) -> tuple[dict[str, str], dict[str, Any]]:
    """A custom credential type's injectors for one credential: (environment, extra vars); `file` templates are
    written under `env_dir` (mode 0600, AWX's layout), reachable as `tower.filename.<name>`."""
    injectors = ctype.get("injectors") or {}
    jenv = jinja2.Environment(undefined=jinja2.StrictUndefined)
    files: dict[str, str] = {}
    for key, template in (injectors.get("file") or {}).items():
        name = key.removeprefix("template.") if key != "template" else "__default"
        env_dir.mkdir(parents=True, exist_ok=True)
        path = env_dir / f"tmp_cred_{name}"
        path.write_text(jenv.from_string(template).render(**inputs))
        path.chmod(0o600)
        files[name] = str(path)
    context = {**inputs, "tower": {"filename": files.get("__default", files)},
               "awx": {"filename": files.get("__default", files)}}
    environ = {k: jenv.from_string(v).render(**context) for k, v in (injectors.get("env") or {}).items()}
    extra = {k: jenv.from_string(v).render(**context) for k, v in (injectors.get("extra_vars") or {}).items()}
    return environ, extra


def job_extra_vars(template: dict[str, Any], extra_data: dict[str, Any], artifacts: dict[str, Any],
                   workflow: dict[str, Any], credentials: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A workflow node's job's extra vars, low to high precedence as AWX merges them: the job template's, the
    node's extra_data (prompted), its ancestors' artifacts (less `_ansible_no_log`), the workflow job's (template
    and launch), the credentials' extra_vars injectors, then AWX's `awx_*` and `tower_*` job variables."""
    extra: dict[str, Any] = {**template, **extra_data}
    extra.update({k: v for k, v in artifacts.items() if k != "_ansible_no_log"})
    extra.update(workflow)
    extra.update(credentials)
    for prefix in ("awx", "tower"):
        extra.update({f"{prefix}_{k}": v for k, v in meta.items()})
    return extra


def _artifacts(runner: Any) -> dict[str, Any]:
    """What the job's set_stats gathered (AWX: the job's `artifacts`, from the playbook_on_stats event)."""
    for event in runner.events:
        if event.get("event") == "playbook_on_stats":
            return dict(event.get("event_data", {}).get("artifact_data") or {})
    return {}


def _failures(runner: Any) -> list[str]:
    """The job's failed tasks, worded as the orchestrator words a step's (runner.failure_text)."""
    return [text for event in runner.events if (text := failure_text(event))]


class Contract:
    """Runs exported workflows: `Contract(export, work_dir).launch(name, launch_vars)`."""

    def __init__(self, export: Export, work_dir: Path, credential_inputs: dict[str, dict[str, Any]] | None = None,
                 on_node: Callable[[str, str], None] | None = None) -> None:
        self.export = export
        self.work_dir = work_dir
        self.cache = ProjectCache(work_dir)
        self.credential_inputs = credential_inputs or {}
        self.on_node = on_node or (lambda identifier, what: None)
        self._ids = itertools.count(int(time.time()) % 100000 * 10)
        self._inventories: dict[str, dict[str, Any]] = {}

    def _inventory(self, name: str, project: Path) -> dict[str, Any]:
        if name not in self._inventories:
            source = next(s for s in self.export.objects.get("inventory_source", {}).values()
                          if s["inventory"] == name)
            self._inventories[name] = import_inventory(project, source["source_path"])
        return self._inventories[name]

    def launch(self, name: str, launch_vars: dict[str, Any] | None = None) -> WorkflowJob:
        wfjt = self.export.workflow(name)
        wf = WorkflowJob(next(self._ids), name, {**(wfjt.get("extra_vars") or {}), **(launch_vars or {})},
                         started=time.time())
        nodes = {n["identifier"]: n for n in wfjt["workflow_nodes"]}
        parents: dict[str, list[tuple[str, str]]] = {i: [] for i in nodes}
        for ident, node in nodes.items():
            for kind in ("success", "failure", "always"):
                for child in (node.get("related") or {}).get(f"{kind}_nodes", []):
                    parents[child["identifier"]].append((ident, kind))
        fired: set[str] = {i for i, ps in parents.items() if not ps}  # roots start at once
        done: dict[str, NodeJob] = {}
        ancestors: dict[str, dict[str, Any]] = {}
        while True:
            ready = [i for i in nodes if i in fired and i not in done]
            if not ready:
                break
            ident = ready[0]
            aa: dict[str, Any] = {}
            for parent, _kind in parents[ident]:
                if parent in done:
                    aa.update(ancestors.get(parent, {}))
                    aa.update(done[parent].artifacts)
            ancestors[ident] = aa
            job = self._run_node(wf, nodes[ident], aa)
            done[ident] = job
            wf.jobs.append(job)
            edges = (nodes[ident].get("related") or {})
            for kind in ("always", "success" if job.ok else "failure"):
                fired.update(c["identifier"] for c in edges.get(f"{kind}_nodes", []))
        wf.not_run = [i for i in nodes if i not in done]
        wf.ended = time.time()
        return wf

    def _run_node(self, wf: WorkflowJob, node: dict[str, Any], artifacts: dict[str, Any]) -> NodeJob:
        jt = self.export.get("job_template", node["unified_job_template"]["name"])
        job_id = next(self._ids)
        pdd = self.work_dir / f"awx_{job_id}_{node['identifier']}"
        (pdd / "env").mkdir(parents=True)
        self.cache.checkout(pdd / "project")
        inventory = self._inventory(node["inventory"]["name"], pdd / "project")
        # AWX hands a job its inventory as an executable script printing the imported JSON.
        (pdd / "inventory").mkdir()
        script = pdd / "inventory" / "hosts"
        script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({json.dumps(inventory)!r} and "
                          f"json.loads({json.dumps(inventory)!r})))\n")
        script.chmod(0o700)
        # The execution environment's own variables (orchestrator/awx_ee.py): the job's checkout on PYTHONPATH, the
        # host's state and podman configuration; no ANSIBLE_CONFIG (AWX runs in the project: its ansible.cfg).
        environ = {k: v for k, v in ansible_env().items() if k != "ANSIBLE_CONFIG"}
        environ["PYTHONPATH"] = str(pdd / "project")
        cred_vars: dict[str, Any] = {}
        for ref in (node.get("related") or {}).get("credentials", []):
            cred = self.export.get("credential", ref["name"])
            ctype = self.export.get("credential_type", cred["credential_type"])
            inputs = self.credential_inputs.get(ref["name"], cred.get("inputs") or {})
            more_env, more_vars = inject_credential(ctype, inputs, pdd / "env")
            environ.update(more_env)
            cred_vars.update(more_vars)
        meta = {"job_id": job_id, "job_template_name": jt["name"], "workflow_job_id": wf.id,
                "workflow_job_name": wf.name, "job_launch_type": "workflow", "project_revision": "",
                "inventory_name": node["inventory"]["name"]}
        extra = job_extra_vars(jt.get("extra_vars") or {}, node.get("extra_data") or {}, artifacts, wf.extra_vars,
                               cred_vars, meta)
        (pdd / "env" / "extravars").write_text(json.dumps(extra))
        self.on_node(node["identifier"], "started")
        started = time.time()
        runner = ansible_runner.run(private_data_dir=str(pdd), project_dir=str(pdd / "project"),
                                    playbook=jt["playbook"], envvars=environ, quiet=True,
                                    settings={"suppress_env_files": True})
        ended = time.time()
        status = runner.status if runner.status in ("successful", "canceled") else "failed"
        job = NodeJob(node["identifier"], job_id, status, runner.rc, started, ended, _artifacts(runner), pdd,
                      _failures(runner))
        self.on_node(node["identifier"], status)
        return job


def record(wf: WorkflowJob, spec_path: Path) -> dict[str, Any]:
    """Index a workflow job like an orchestrator run (SQLite: the run, its phases, its metrics) and return the
    summary `results` and `report` read. Phases are the nodes' jobs (the check nodes by their identifiers)."""
    from orchestrator.catalog import find_scenario

    ev = wf.extra_vars
    run_id = f"awx-{wf.id}"
    scn = find_scenario(str(ev["opsbench_scenario"]))
    run_dir = Path(str(ev["opsbench_awx_run_root"])) / run_id
    agent_cmd = str(ev.get("opsbench_agent_command", "")).replace("{{ ansible_playbook_python }}", sys.executable)
    store.create_run({"id": run_id, "scenario_id": scn.id, "spec_version": scn.version, "spec_digest": scn.digest,
                      "status": "running", "pid": os.getpid(), "run_dir": str(run_dir), "agent": agent_cmd,
                      "spec_path": str(spec_path)})
    with store.connect() as db:
        for job in wf.jobs:
            db.execute("INSERT INTO phases (run_id, seq, phase, status, started, ended, detail) VALUES (?,?,?,?,?,?,?)",
                       (run_id, len(wf.ran[:wf.ran.index(job.identifier)]) + 1, job.identifier, job.status,
                        job.started, job.ended, "; ".join(job.failures)[:2000] or None))
    def stats(identifier: str, key: str) -> Any:
        job = wf.job(identifier)
        return (job.artifacts.get("opsbench") or {}).get(key, {}) if job else {}

    evaluations, agent = stats("evaluate", "evaluations"), stats("agent", "agent")
    forward = FORWARD
    first_bad = next((j for j in wf.jobs if j.identifier in forward and not j.ok), None)
    undo = [j for j in wf.jobs if j.identifier in ("revoke", "remove", "teardown")]
    status = "completed" if first_bad is None and all(wf.job(s) for s in forward) else "error"
    if first_bad is not None and first_bad.identifier == "manifestation":
        status = "invalid"
    summary = {
        "run_id": run_id, "scenario": scn.id, "status": status,
        "reason": f"node {first_bad.identifier} {first_bad.status}: {'; '.join(first_bad.failures)[:500]}"
        if first_bad else "",
        "agent": agent, "evaluations": evaluations,
        "cleanup": "done" if undo and all(j.ok for j in undo) else "failed",
        "cleanup_problems": [f"{j.identifier}: {j.status}" for j in undo if not j.ok],
        "recovered": recovery.ok if (recovery := wf.job("recovery")) else None,
        "phases": {j.identifier: {"status": j.status, "elapsed": round(j.ended - j.started, 2)} for j in wf.jobs},
        "run_dir": str(run_dir), "awx": {"workflow_job_id": wf.id, "not_run": wf.not_run},
    }
    store.update_run(run_id, status=status, outcome=json.dumps(summary, sort_keys=True))
    return summary


# -- benchmark: an AWX-contract run against the orchestrator's run of the same scenario ----------------------------

def bench(scenario: str, repeats: int, work: Path) -> dict[str, Any]:
    """Alternate `repeats` orchestrator runs (`opsbench run SCENARIO --json`) and AWX-contract runs of the same
    scenario on this machine; wall time of each, per step, and the ratios of the medians."""
    import statistics

    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPSBENCH_HOME": str(home)}
    os.environ["OPSBENCH_HOME"] = str(home)
    out = work / "opsbench_awx.yml"
    subprocess.run([sys.executable, "-m", "orchestrator.cli", "awx", "export", "-o", str(out), "--host",
                    f"local:{scenario}"], env=env, check=True, capture_output=True, cwd=paths.PROJECT_ROOT)
    contract = Contract(Export.load(out), work / "awx")
    orch: list[dict[str, Any]] = []
    awx: list[dict[str, Any]] = []
    for i in range(repeats):
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", scenario, "--json"], env=env,
                              capture_output=True, text=True, cwd=paths.PROJECT_ROOT, check=False)
        summary = json.loads(proc.stdout)
        orch.append({"wall": time.monotonic() - start, "status": summary["status"],
                     "steps": {k: v["elapsed"] for k, v in summary["phases"].items()}})
        start = time.monotonic()
        wf = contract.launch(f"opsbench {scenario} @ local", {"opsbench_awx_run_root": str(work / "awx-runs")})
        awx.append({"wall": time.monotonic() - start, "status": "completed" if all(j.ok for j in wf.jobs) else "error",
                    "steps": {j.identifier: round(j.ended - j.started, 2) for j in wf.jobs}})
        print(f"trial {i + 1}/{repeats}: orchestrator {orch[-1]['wall']:.1f} s ({orch[-1]['status']}), "
              f"AWX contract {awx[-1]['wall']:.1f} s ({awx[-1]['status']})", file=sys.stderr, flush=True)

    def med(runs: list[dict[str, Any]], step: str | None = None) -> float:
        values = [r["wall"] if step is None else r["steps"].get(step) for r in runs]
        return round(float(statistics.median(v for v in values if v is not None)), 2)

    steps = [s for s in awx[0]["steps"] if s in orch[0]["steps"] or s in ("baseline", "manifestation", "recovery")]
    return {"scenario": scenario, "repeats": repeats, "load": os.getloadavg(),
            "orchestrator_s": med(orch), "awx_contract_s": med(awx), "ratio": round(med(awx) / med(orch), 3),
            "steps": {s: {"orchestrator_s": med(orch, s), "awx_contract_s": med(awx, s)} for s in steps},
            "statuses": {"orchestrator": [r["status"] for r in orch], "awx_contract": [r["status"] for r in awx]}}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m tests.e2e.awx_contract",
                                     description="Time AWX-contract runs against the orchestrator's (make bench-awx)")
    parser.add_argument("scenario", nargs="?", default="loopweb-web-down")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-awx-") as work:
        report = bench(args.scenario, args.repeats, Path(work))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
