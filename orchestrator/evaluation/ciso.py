"""CISO compliance assessment scoring (ITBench Appendix D.5.3): IEC, IPA, CE, SAP, pass@1, time to process.

The agent submits two artifacts in its output (ciso_output schema): an Ansible playbook, the
*fetcher*, that collects evidence from the target host and writes it as one JSON document to
``{{ evidence_path }}`` on the controller; and a Rego policy, the *checker*, whose rule
``compliant`` (in the policy's own package) decides the posture from that evidence as ``input``.

- IEC: the fetcher exists and parses (``ansible-playbook --syntax-check``).
- IPA: the policy exists and compiles (a real OPA engine, ``regopy``/rego-cpp).
- CE: the fetcher ran against the target within its time limit, left the host unchanged and
  wrote JSON evidence. A fetcher that changes the host fails CE and the change is reverted.
- SAP: ``data.<package>.compliant`` evaluated on the evidence is a boolean equal to the
  expected posture in the ground truth (``posture.compliant``). Undefined or non-boolean fails.
- pass: SAP (it implies the other three). ``time_to_process``: the agent's time from handover
  to its submission (its run time).

Every engine call runs in a child process with a time limit: rego-cpp aborts the whole
process on some inputs, and a policy or a fetcher must never hang the evaluation.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE_RE = re.compile(r"^\s*package\s+([A-Za-z_][\w.]*)\s*$", re.MULTILINE)
DECISION_RULE = "compliant"
FETCHER_NAMES = ("playbook.yml", "playbook.yaml")
CHECKER_NAMES = ("policy.rego",)
FETCHER_ANSIBLE_ENV = ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP")
# What the host snapshot leaves out: pseudo file systems, temp dirs and Ansible's own remote temp dir.
SNAPSHOT_PRUNE = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/root/.ansible", "/var/cache", "/var/log")
# What is archived before the fetcher runs, to revert a fetcher that changed the host.
RESTORE_ROOTS = ("etc", "root", "home", "srv", "opt", "usr/local", "var/lib", "var/spool")


@dataclass
class Artifacts:
    fetcher: str | None = None
    checker: str | None = None
    problem: str = ""


def pick_artifacts(output: dict[str, Any]) -> Artifacts:
    """The fetcher playbook and the Rego checker among the output's artifacts (by kind, then by name)."""
    arts = output.get("artifacts")
    if not isinstance(arts, list):
        return Artifacts(problem="output has no artifacts list")
    found = Artifacts()
    for art in arts:
        if not isinstance(art, dict) or not isinstance(art.get("content"), str):
            continue
        name, kind = str(art.get("name", "")), art.get("kind")
        if found.fetcher is None and (kind == "ansible_playbook" or name in FETCHER_NAMES):
            found.fetcher = art["content"]
        elif found.checker is None and (kind == "rego" or name in CHECKER_NAMES):
            found.checker = art["content"]
    return found


# -- Rego ------------------------------------------------------------------------------------
def package_of(policy: str) -> str | None:
    match = PACKAGE_RE.search(policy)
    return match.group(1) if match else None


def rego_child(policy: str, ref: str, input_json: str | None) -> dict[str, Any]:
    """Runs in the child process: compile the policy and read one reference.

    The query binds the reference (``value := <ref>``): rego-cpp answers a bare reference whose
    value is ``false`` as undefined, a binding keeps false apart from undefined."""
    from regopy import Interpreter, RegoError

    interp = Interpreter()
    try:
        interp.add_module("policy.rego", policy)
        if input_json is not None:
            interp.set_input_term(input_json)
        out = str(interp.query(f"value := {ref}"))
    except RegoError as exc:
        return {"ok": False, "error": " ".join(str(exc).split())[:500]}
    if out.strip() == "undefined":
        return {"ok": True, "defined": False}
    try:
        parsed = json.loads(out)
    except ValueError:
        return {"ok": False, "error": " ".join(out.split())[:500]}
    bindings = parsed.get("bindings") if isinstance(parsed, dict) else None
    if not isinstance(bindings, dict) or "value" not in bindings:
        return {"ok": False, "error": " ".join(out.split())[:500]}
    return {"ok": True, "defined": True, "value": bindings["value"]}


def rego_query(policy: str, query: str, input_doc: Any = None, timeout: float = 10.0) -> dict[str, Any]:
    """Compile ``policy`` and read the reference ``query`` (with ``input_doc`` as input) in a child process.

    Returns {ok, defined, value} or {ok: False, error}; a crash or a time-out is an error."""
    payload = json.dumps({"policy": policy, "query": query,
                          "input": None if input_doc is None else json.dumps(input_doc)})
    try:
        proc = subprocess.run([sys.executable, "-m", "orchestrator.evaluation.ciso", "rego"],
                              input=payload, capture_output=True, text=True, timeout=timeout,
                              cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"policy evaluation exceeded {timeout:g}s"}
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    try:
        result = json.loads(last[0])
    except ValueError:
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        return {"ok": False, "error": f"policy engine failed (exit {proc.returncode}): {tail}"}
    return result if isinstance(result, dict) else {"ok": False, "error": "policy engine answered nonsense"}


def compile_policy(policy: str | None, timeout: float = 10.0) -> tuple[bool, str | None, str]:
    """IPA: (compiles, package, reason)."""
    if not policy or not policy.strip():
        return False, None, "no Rego policy submitted"
    package = package_of(policy)
    if package is None:
        return False, None, "the policy has no package declaration"
    result = rego_query(policy, f"data.{package}", {}, timeout)
    if not result["ok"]:
        return False, package, f"the policy does not compile: {result['error']}"
    return True, package, ""


def decide(policy: str, package: str, evidence: Any, timeout: float = 10.0) -> tuple[bool | None, str]:
    """The posture the policy decides on the evidence: True/False, or None with the reason."""
    result = rego_query(policy, f"data.{package}.{DECISION_RULE}", evidence, timeout)
    if not result["ok"]:
        return None, f"policy evaluation failed: {result['error']}"
    if not result.get("defined"):
        return None, f"the policy returned no result: data.{package}.{DECISION_RULE} is undefined"
    value = result.get("value")
    if not isinstance(value, bool):
        return None, f"data.{package}.{DECISION_RULE} is {json.dumps(value)[:80]}, not a boolean"
    return value, ""


# -- the fetcher -----------------------------------------------------------------------------
def syntax_check(playbook: Path, inventory: Path, timeout: float = 60.0) -> tuple[bool, str]:
    """IEC: the playbook parses as an Ansible playbook."""
    if not playbook.is_file() or not playbook.read_text().strip():
        return False, "no fetcher playbook submitted"
    try:
        proc = subprocess.run([*_ansible("ansible-playbook"), "--syntax-check", "-i", str(inventory), str(playbook)],
                              capture_output=True, text=True, timeout=timeout, cwd=playbook.parent,
                              env=fetcher_env())
    except subprocess.TimeoutExpired:
        return False, f"syntax check exceeded {timeout:g}s"
    if proc.returncode != 0:
        return False, "the fetcher does not parse: " + " ".join((proc.stderr or proc.stdout).split())[-400:]
    return True, ""


def fetcher_env() -> dict[str, str]:
    """A plain Ansible for the fetcher: none of the step's runner callbacks, config or remote temp dir
    (a controller path would be created on the host); ~/.ansible/tmp on the host is left out of snapshots."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") or k in FETCHER_ANSIBLE_ENV}
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def _ansible(tool: str) -> list[str]:
    local = Path(sys.executable).parent / tool
    return [str(local) if local.exists() else tool]


@dataclass
class FetchResult:
    ran: bool = False
    rc: int | None = None
    timed_out: bool = False
    elapsed: float = 0.0
    evidence: Any = None
    reason: str = ""
    log_tail: list[str] = field(default_factory=list)


def run_fetcher(playbook: Path, inventory: Path, evidence_path: Path, timeout: float) -> FetchResult:
    """Run the fetcher against the target; kill its whole session past ``timeout``."""
    evidence_path.unlink(missing_ok=True)
    log = playbook.parent / "fetcher.log"
    start = time.monotonic()
    env = fetcher_env()
    with log.open("w") as out:
        proc = subprocess.Popen([*_ansible("ansible-playbook"), "-i", str(inventory), str(playbook),
                                 "-e", json.dumps({"evidence_path": str(evidence_path)})],
                                stdout=out, stderr=subprocess.STDOUT, cwd=playbook.parent,
                                start_new_session=True, env=env)
        try:
            rc = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            rc, timed_out = None, True
    res = FetchResult(ran=True, rc=rc, timed_out=timed_out, elapsed=round(time.monotonic() - start, 2),
                      log_tail=log.read_text(errors="replace").splitlines()[-15:])
    if timed_out:
        res.reason = f"the fetcher exceeded its time limit ({timeout:g}s) and was stopped"
    elif rc != 0:
        res.reason = f"the fetcher failed (ansible-playbook exit {rc})"
    elif not evidence_path.is_file():
        res.reason = "the fetcher wrote no evidence to evidence_path"
    else:
        try:
            res.evidence = json.loads(evidence_path.read_text())
        except ValueError as exc:
            res.reason = f"the evidence is not JSON: {exc}"
    return res


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (ansible-core runs each worker in a session of its own, out of killpg's reach)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_session(proc: subprocess.Popen[Any]) -> None:
    """Stop the fetcher: its session (SIGTERM, then SIGKILL), then whatever it had started anywhere below it."""
    below = _descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in below):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# -- the host: read-only guard -------------------------------------------------------------
def _podman(args: list[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(["podman", *args], capture_output=True, timeout=120, check=False, **kw)


def snapshot(container: str) -> dict[str, str]:
    """Path -> type, mode, owner, size and content digest (regular files) of the host's file system."""
    prune = " -o ".join(f"-path {p}" for p in SNAPSHOT_PRUNE)
    script = (f"find / -xdev \\( {prune} \\) -prune -o -printf '%y %m %U %G %s %p\\n' ; "
              f"find / -xdev \\( {prune} \\) -prune -o -type f -size -2M -print0 | xargs -0 -r md5sum")
    proc = _podman(["exec", container, "sh", "-c", script], text=True)
    if proc.returncode not in (0, 1) or not proc.stdout:
        raise RuntimeError(f"cannot read the target host {container}: {proc.stderr.strip()[:300]}")
    entries: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        parts = line.split(" ", 5)
        if len(parts) == 6 and len(parts[0]) == 1:
            entries[parts[5]] = " ".join(parts[:5])
        elif re.match(r"^[0-9a-f]{32}  ", line):
            path = line[34:]
            entries[path] = entries.get(path, "") + " md5=" + line[:32]
    return entries


def diff_snapshots(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changes = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    changes += [f"deleted {p}" for p in sorted(before.keys() - after.keys())]
    changes += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return changes


def processes(container: str) -> set[int]:
    proc = _podman(["exec", container, "ps", "-e", "-o", "pid="], text=True)
    return {int(x) for x in proc.stdout.split() if x.isdigit()}


def stop_strays(container: str, before: set[int]) -> list[int]:
    """Kill processes the fetcher left running in the host (a hung fetcher's remote commands)."""
    new = processes(container) - before
    time.sleep(0.5)  # a podman exec that was just ending is not a stray
    strays = sorted(new & processes(container))
    if strays:
        _podman(["exec", container, "kill", "-9", *map(str, strays)])
    return strays


def archive(container: str, dest: Path) -> None:
    with dest.open("wb") as out:
        proc = subprocess.run(["podman", "exec", container, "tar", "-C", "/", "--numeric-owner", "-cpf", "-",
                               "--ignore-failed-read", *RESTORE_ROOTS], stdout=out, stderr=subprocess.PIPE,
                              timeout=120, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"cannot archive the target host: {proc.stderr.decode(errors='replace')[:300]}")


def restore(container: str, saved: Path, before: dict[str, str], after: dict[str, str]) -> None:
    """Put the archived trees back and delete what the fetcher added."""
    added = sorted(after.keys() - before.keys(), key=len, reverse=True)
    if added:
        _podman(["exec", container, "rm", "-rf", "--", *added])
    with saved.open("rb") as src:
        subprocess.run(["podman", "exec", "-i", container, "tar", "-C", "/", "--numeric-owner", "-xpf", "-"],
                       stdin=src, capture_output=True, timeout=120, check=False)


# -- read-only guards: the target before and after the fetcher ------------------------------------
class HostGuard:
    """A podman container host: file-system snapshot and archive before, diff, revert and stray kill after."""

    def __init__(self, container: str, work_dir: Path) -> None:
        self.container, self.saved = container, work_dir / "host-before.tar"
        self.before: dict[str, str] = {}
        self.pids: set[int] = set()

    def start(self) -> None:
        self.before = snapshot(self.container)
        archive(self.container, self.saved)
        self.pids = processes(self.container)

    def finish(self) -> tuple[list[str], dict[str, Any]]:
        extra: dict[str, Any] = {}
        if strays := stop_strays(self.container, self.pids):
            extra["stray_processes_stopped"] = len(strays)
        after = snapshot(self.container)
        changes = diff_snapshots(self.before, after)
        if changes:
            restore(self.container, self.saved, self.before, after)
            left = diff_snapshots(self.before, snapshot(self.container))
            extra.update(host_restored=not left, host_left=left[:5])
        self.saved.unlink(missing_ok=True)
        return changes, extra


class FileGuard:
    """An offline target made of files (a recorded cluster state): content before, compare and put back after."""

    def __init__(self, files: list[str]) -> None:
        self.files = [Path(f) for f in files]
        self.before: dict[Path, bytes | None] = {}

    def _read(self) -> dict[Path, bytes | None]:
        return {f: f.read_bytes() if f.is_file() else None for f in self.files}

    def start(self) -> None:
        self.before = self._read()

    def finish(self) -> tuple[list[str], dict[str, Any]]:
        now = self._read()
        changes = [f"{'deleted' if now[f] is None else 'changed'} {f}" for f in self.files if now[f] != self.before[f]]
        if not changes:
            return [], {}
        for f, content in self.before.items():
            if content is not None:
                f.write_bytes(content)
        left = [str(f) for f, content in self._read().items() if content != self.before[f]]
        return changes, {"host_restored": not left, "host_left": left}


class ClusterGuard:
    """A live Kubernetes cluster: the objects a fetcher could change (uid, generation or a digest of their
    desired state) before and after, read with kubectl. A change is reported, not reverted."""

    KINDS = ("namespaces,serviceaccounts,services,configmaps,deployments,statefulsets,daemonsets,jobs,cronjobs,"
             "roles,rolebindings,clusterroles,clusterrolebindings,networkpolicies")

    def __init__(self, kubeconfig: str, context: str = "") -> None:
        self.base = ["kubectl", "--kubeconfig", kubeconfig, *(["--context", context] if context else [])]
        self.before: dict[str, str] = {}

    def _read(self) -> dict[str, str]:
        proc = subprocess.run([*self.base, "get", self.KINDS, "-A", "-o", "json"], capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cannot read the cluster: {' '.join(proc.stderr.split())[:300]}")
        out: dict[str, str] = {}
        for obj in json.loads(proc.stdout).get("items", []):
            meta = obj.get("metadata") or {}
            key = f"{obj.get('kind')}/{meta.get('namespace', '')}/{meta.get('name')}"
            desired = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
            desired["labels"], desired["annotations"] = meta.get("labels"), meta.get("annotations")
            digest = hashlib.sha256(json.dumps(desired, sort_keys=True).encode()).hexdigest()[:16]
            out[key] = f"{meta.get('uid')} {meta.get('generation', '')} {digest}"
        return out

    def start(self) -> None:
        self.before = self._read()

    def finish(self) -> tuple[list[str], dict[str, Any]]:
        changes = diff_snapshots(self.before, self._read())
        return changes, ({"host_restored": False, "host_left": changes[:5]} if changes else {})


Guard = HostGuard | FileGuard | ClusterGuard


def guard_for(control: dict[str, Any], work_dir: Path) -> Guard:
    """The guard for a target as the environment published it (environment.json ``control``)."""
    if control.get("container"):
        return HostGuard(str(control["container"]), work_dir)
    if control.get("files"):
        return FileGuard([str(f) for f in control["files"]])
    if control.get("kubeconfig"):
        return ClusterGuard(str(control["kubeconfig"]), str(control.get("context") or ""))
    raise RuntimeError(f"the environment publishes no target to guard (control: {sorted(control)})")


# -- scoring -------------------------------------------------------------------------------
def expected_posture(ground_truth: dict[str, Any]) -> bool | None:
    posture = ground_truth.get("posture") or {}
    value = posture.get("compliant")
    return value if isinstance(value, bool) else None


def agent_time(timeline: dict[str, Any]) -> float | None:
    agent = timeline.get("agent") or {}
    if "started_at" in agent and "ended_at" in agent:
        return round(float(agent["ended_at"]) - float(agent["started_at"]), 2)
    return None


def score(*, status: str, iec: bool, ipa: bool, ce: bool, decided: bool | None, expected: bool | None,
          reasons: list[str], time_to_process: float | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scores of one assessment from what the evaluator found (pure; unit-tested)."""
    sap = bool(iec and ipa and ce and decided is not None and expected is not None and decided == expected)
    if expected is None:
        reasons = [*reasons, "the ground truth has no expected posture"]
    elif decided is not None and decided != expected:
        reasons = [*reasons, f"the policy decided {'compliant' if decided else 'non-compliant'}, "
                             f"the host is {'compliant' if expected else 'non-compliant'}"]
    return {"status": status, "iec": int(iec), "ipa": int(ipa), "ce": int(ce), "sap": int(sap),
            "ciso_pass": int(sap), "posture": None if decided is None else ("compliant" if decided else "noncompliant"),
            "expected": None if expected is None else ("compliant" if expected else "noncompliant"),
            "time_to_process": time_to_process, "reasons": reasons, **(extra or {})}


def assess(output_path: Path, ground_truth: dict[str, Any], inventory: Path, target: str | Guard, work_dir: Path,
           timeline: dict[str, Any], fetcher_timeout: float = 60.0, policy_timeout: float = 10.0) -> dict[str, Any]:
    """Run the whole evaluation of one submission against the run's target.

    ``target`` is the host container's name or a guard (``guard_for`` the environment's ``control``)."""
    expected = expected_posture(ground_truth)
    ttp = agent_time(timeline)
    work_dir.mkdir(parents=True, exist_ok=True)
    if not output_path.is_file():
        return score(status="no_submission", iec=False, ipa=False, ce=False, decided=None, expected=expected,
                     reasons=["the agent submitted no output"], time_to_process=ttp)
    try:
        output = json.loads(output_path.read_text())
    except ValueError as exc:
        return score(status="malformed", iec=False, ipa=False, ce=False, decided=None, expected=expected,
                     reasons=[f"the output is not JSON: {exc}"], time_to_process=ttp)
    arts = pick_artifacts(output if isinstance(output, dict) else {})
    reasons = [arts.problem] if arts.problem else []
    playbook = work_dir / "playbook.yml"
    playbook.write_text(arts.fetcher or "")
    (work_dir / "policy.rego").write_text(arts.checker or "")
    iec, why = syntax_check(playbook, inventory)
    reasons += [why] if why else []
    ipa, package, why = compile_policy(arts.checker, policy_timeout)
    reasons += [why] if why else []
    extra: dict[str, Any] = {"host_changed": False, "host_restored": None}
    ce, decided = False, None
    if iec:
        guard = HostGuard(target, work_dir) if isinstance(target, str) else target
        guard.start()
        fetched = run_fetcher(playbook, inventory, work_dir / "evidence.json", fetcher_timeout)
        changes, found = guard.finish()
        left = found.pop("host_left", [])
        extra.update(found)
        extra.update(fetcher_rc=fetched.rc, fetcher_elapsed=fetched.elapsed, fetcher_timed_out=fetched.timed_out)
        if changes:
            extra.update(host_changed=True, host_changes=changes[:20])
            reasons.append(f"the fetcher changed the host ({len(changes)} paths, e.g. {changes[0]}); "
                           + ("reverted" if not left else f"NOT fully reverted: {left[:5]}"))
        if fetched.reason:
            reasons.append(fetched.reason)
        ce = fetched.evidence is not None and not changes
        if ce and ipa and package:
            decided, why = decide(arts.checker or "", package, fetched.evidence, policy_timeout)
            reasons += [why] if why else []
    return score(status="scored", iec=iec, ipa=ipa, ce=ce, decided=decided, expected=expected,
                 reasons=reasons, time_to_process=ttp, extra=extra)


def _child_main() -> None:
    req = json.loads(sys.stdin.read())
    print(json.dumps(rego_child(req["policy"], req["query"], req["input"])), flush=True)


if __name__ == "__main__":  # pragma: no cover - the child process of rego_query
    if sys.argv[1:] == ["rego"]:
        _child_main()
