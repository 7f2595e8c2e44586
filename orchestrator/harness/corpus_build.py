"""``opsbench corpus build``: a corpus of incidents proven live and frozen, drawn from templates or fixed scenarios.

1. **Draw.** Generated instances (`orchestrator.generation`) are written to `<out>/scenarios/<id>/` (spec and
   derived ground truth); for a fixed corpus the catalog's specs are copied there.
2. **Prove and freeze, in one live trial each.** Every instance is recorded (`harness.record`): baseline ->
   inject -> manifestation -> handover -> snapshot -> revoke -> remove -> recovery -> leftover check, instances of
   one environment sharing a deployment, up to `parallel` deployments at once. The recording's manifestation and
   recovery checks and its leftover check are exactly verify-scenarios' proof, so an instance is *verified* when
   its recording was made and its clean-up came back clean; any other is dropped with its reason (its spec and any
   snapshot leave the corpus).
3. **Measure difficulty.** Each verified instance is replayed `replays` times with its baseline agent (the floor,
   never tuned to a split): its solve rate.
4. **Check for leaks.** Every snapshot file and every agent-facing file of those replays (the manifest, the agent's
   own files, the gateway's trajectory) is searched for the templates' ids and fault names, the fault roles, the
   mechanisms and the seed: none may appear.
5. **Index.** `corpus.json` (instances, snapshots, levels, sizes, checksum: nothing about templates or seeds) and
   the owner's `build.json` (template, draw, mechanism and verification of each instance, yields per template).

`build.json` is written after every recording: a build cut short (Ctrl-C, a crash) is resumed by running the same
command again; instances already decided are kept, the rest are recorded. `retry_dropped` records the dropped ones
again (a build disturbed by its machine, e.g. recovery checks that timed out on an overloaded host): each keeps its
earlier drops in `earlier_drops`, and the yields count the instances that needed a retry. A generated corpus may
also grow on resume: a larger count, or templates added or edited. Instances the new draw still holds keep their
recording unless their spec changed since (its hash is kept); those it no longer holds leave the corpus and are
listed under `superseded`. The seed is never written anywhere; the build record keeps its sha256 to refuse resuming
with another one.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.catalog import find_scenario
from orchestrator.corpus import layout
from orchestrator.errors import OpsBenchError
from orchestrator.harness.record import DEFAULT_WINDOW_CAP_S, Recording, not_replayable, record
from orchestrator.harness.replay import ReplayRecord, replay
from orchestrator.progress import Progress
from orchestrator.snapshots.leaks import find_strings
from orchestrator.spec import Scenario

VERIFIED = "verified"
DROPPED = "dropped"
FINAL = frozenset({VERIFIED, DROPPED})
"""Instance statuses a resumed build keeps; any other (pending, interrupted) is recorded again."""
MIN_SEED_NEEDLE = 8
"""A seed shorter than this is not searched for as a leak: it would match by chance."""
LOCK = ".build.lock"
"""The file a running build holds an exclusive lock on, in its corpus folder."""
AGENT_FACING = ("agent", "gateway")
"""The folders of a replay trial's run directory an agent reads or produces: its manifest, output and workspace,
and the trajectory of its tool calls."""


@dataclass(frozen=True)
class BuildRequest:
    """What to build: `templates` with `seed` and `count` (a generated corpus) or fixed `scenarios`."""

    templates: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    seed: str | None = None
    count: int = 0
    replays: int = 1
    parallel: int = 1
    window_cap_s: float = DEFAULT_WINDOW_CAP_S
    reuse: Path | None = None
    """Fixed scenarios only: a folder of snapshots already recorded; a scenario with one there (verified, at its
    current spec version) is not recorded again: the newest is copied in."""
    retry_dropped: bool = False
    """Resuming: record the instances an earlier run dropped again (not part of the request's key)."""
    exclude: frozenset[str] = frozenset()
    """Incidents no instance may be: a public split's (`draw.excluded_incidents`), for a held-out split apart from
    it."""

    def key(self) -> dict[str, Any]:
        """What a resumed build must match: the seed only by its hash, an exclusion by the hash of its incidents."""
        key = {"templates": list(self.templates), "scenarios": list(self.scenarios), "count": self.count,
               "seed_sha256": hashlib.sha256(self.seed.encode()).hexdigest() if self.seed is not None else None}
        if self.exclude:
            key["exclude_sha256"] = hashlib.sha256("\n".join(sorted(self.exclude)).encode()).hexdigest()
        return key


def _check_request(req: BuildRequest) -> None:
    if bool(req.templates) == bool(req.scenarios):
        raise OpsBenchError("give templates (--templates, with --seed or --seed-file and --count) or fixed scenarios "
                            "(--scenarios), not both and not neither")
    if req.templates and (req.seed is None or req.count < 1):
        raise OpsBenchError("a generated corpus needs a seed (--seed or --seed-file) and --count")
    if req.replays < 0:
        raise OpsBenchError("--replays must be 0 or more")
    if req.exclude and not req.templates:
        raise OpsBenchError("--exclude keeps a generated split apart from another: give it with templates")
    if req.reuse is not None and req.templates:
        raise OpsBenchError("--reuse-snapshots freezes fixed scenarios from earlier recordings: give it with "
                            "--scenarios, not with templates (a generated instance is recorded when it is drawn)")
    if req.reuse is not None and not req.reuse.is_dir():
        raise OpsBenchError(f"--reuse-snapshots {req.reuse}: not a folder of snapshots")


def _prepare_out(out: Path, req: BuildRequest) -> dict[str, Any] | None:
    """The previous build record of `out` when resuming a build of the same seed and kind; refuse anything else
    already there. A generated corpus may grow on resume (a larger count, templates added or edited): what the new
    draw no longer holds is removed then (`_reconcile`)."""
    previous = layout.read_build(out) if out.is_dir() else None
    if previous is not None:
        was, now = previous.get("request") or {}, req.key()
        grows = (bool(was.get("templates")) and bool(now["templates"]) and was.get("seed_sha256") == now["seed_sha256"]
                 and was.get("exclude_sha256") == now.get("exclude_sha256")
                 and isinstance(was.get("count"), int) and now["count"] >= was["count"])
        if was != now and not grows:
            raise OpsBenchError(f"{out} holds a corpus built with other arguments ({layout.BUILD_RECORD} request "
                                f"{was}); give an empty --out, or the same arguments to resume (a generated corpus "
                                "may also resume with a larger --count or other templates, never another seed)")
        return previous
    if out.exists() and (not out.is_dir() or any(p.name != LOCK for p in out.iterdir())):
        raise OpsBenchError(f"{out} exists and is not an empty folder or a corpus this build started: give a new "
                            "--out")
    out.mkdir(parents=True, exist_ok=True)
    return None


def _draw(req: BuildRequest, out: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The corpus's instances written under `<out>/scenarios`, and the draws generation dropped."""
    scenarios_dir = out / layout.SCENARIOS
    if req.templates:
        from orchestrator.draw import generate_into
        from orchestrator.generation.templates import load_template

        assert req.seed is not None
        for name in req.templates:
            why = not_replayable(find_scenario(name))
            if why:
                raise OpsBenchError(f"template {name} cannot make a frozen corpus: its instances {why}")
        drawn = generate_into(req.templates, req.seed, req.count, scenarios_dir, req.exclude)
        models = {t: load_template(find_scenario(t)) for t in req.templates}
        instances = [{"id": i["id"], "template": i["template"], "draw": i["draw"],
                      "mechanism": models[i["template"]].model.mechanism,
                      "role": models[i["template"]].model.role} for i in drawn["instances"]]
        return instances, list(drawn["dropped"])
    instances = []
    for name in req.scenarios:
        scn = find_scenario(name)
        why = not_replayable(scn)
        if why:
            raise OpsBenchError(f"scenario {scn.id} cannot be frozen: {why}")
        target = scenarios_dir / scn.id
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(scn.path.parent, target)
        instances.append({"id": scn.id, "template": None, "draw": None,
                          "mechanism": ", ".join(sorted({str(f["role"]) for f in scn.faults})) or "none",
                          "role": ", ".join(sorted({str(f["role"]) for f in scn.faults}))})
    return instances, []


def _leak_needles(req: BuildRequest, instances: list[dict[str, Any]]) -> list[str]:
    """The strings no agent-facing file may hold: template ids, the templates' fault names and roles, the
    mechanisms (the distractors' too), and the seed (when long enough to mean something)."""
    from orchestrator.generation.templates import load_template

    needles: set[str] = set()
    for name in req.templates:
        scn = find_scenario(name)
        needles.add(scn.id)
        for fault in scn.faults:
            needles.add(str(fault["role"]))
            if len(str(fault.get("name", ""))) >= 4:
                needles.add(str(fault["name"]))
        distractor = load_template(scn).distractor
        if distractor is not None:  # which fault is the benign one is the owner's too
            needles |= {distractor.role, distractor.mechanism}
    for inst in instances:
        if inst["template"]:
            needles.add(inst["mechanism"])
            needles.add(inst["role"])
    if req.seed and len(req.seed) >= MIN_SEED_NEEDLE:
        needles.add(req.seed)
    return sorted(needles)


def leak_check(out: Path, needles: list[str], replay_dirs: list[Path]) -> dict[str, Any]:
    """Search every snapshot file and the agent-facing files of `replay_dirs` for `needles` (case-insensitive).
    The needles themselves are not reported (one may be the seed): only which file holds the n-th one."""
    files = 0
    leaks: list[dict[str, Any]] = []
    roots = [out / layout.SNAPSHOTS, *(d / sub for d in replay_dirs for sub in AGENT_FACING)]
    for root in roots:
        if not root.is_dir():
            continue
        files += sum(1 for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        for leak in find_strings(root, needles):
            leaks.append({"file": str(root / leak.file), "needle": needles.index(leak.string)})
    return {"files": files, "needles": len(needles), "leaks": leaks}


def _run_dir(run_id: str) -> Path | None:
    from orchestrator import store

    row = store.get_run(run_id) if run_id else None
    return Path(row["run_dir"]) if row else None


def build(req: BuildRequest, out: Path, progress: Progress, echo: Callable[[str], None] = lambda s: None
          ) -> dict[str, Any]:
    """Build (or resume) the corpus `req` asks for in `out`; returns the build record (see the module docstring)."""
    _check_request(req)
    out = Path(out).resolve()
    previous = _prepare_out(out, req)
    with _exclusive(out):
        return _build(req, out, previous, progress, echo)


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One build at a time on a corpus folder: a second one is refused (the first's record would be overwritten)."""
    with (out / LOCK).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OpsBenchError(f"another `opsbench corpus build` is running on {out}: wait for it to end (or stop "
                                "it with Ctrl-C), then run this one again") from None
        yield


def _sweep_orphans(out: Path, instances: list[dict[str, Any]], echo: Callable[[str], None]) -> None:
    """Remove snapshot folders that no instance names (a build killed between its recording and its record): a
    corpus hands agents exactly the snapshots its index lists."""
    snapshots = out / layout.SNAPSHOTS
    named = {Path(str(i["snapshot"])).name for i in instances if i.get("snapshot")}
    orphans = [p for p in snapshots.iterdir() if p.is_dir() and p.name not in named] if snapshots.is_dir() else []
    for folder in orphans:
        shutil.rmtree(folder, ignore_errors=True)
    if orphans:
        echo(f"removed {len(orphans)} snapshot folder(s) no instance names (a build cut short after recording them)")


def _build(req: BuildRequest, out: Path, previous: dict[str, Any] | None, progress: Progress,
           echo: Callable[[str], None]) -> dict[str, Any]:
    started = time.time()
    instances, dropped_draws = _draw(req, out)
    before = {i["id"]: i for i in (previous or {}).get("instances", [])}
    superseded = [*(previous or {}).get("superseded", []), *_reconcile(out, before, instances, echo)]
    for inst in instances:
        inst.update({k: v for k, v in before.get(inst["id"], {}).items() if k not in inst or inst[k] is None})
        inst.setdefault("status", "pending")
        if inst["status"] in FINAL and inst.get("spec_sha256") not in (None, _spec_sha(out, inst["id"])):
            _forget_recording(out, inst)
            inst.update(status="pending", reason="its spec changed since it was recorded")
        if req.retry_dropped and inst["status"] == DROPPED:
            inst.setdefault("earlier_drops", []).append({"reason": inst.get("reason", ""),
                                                         "recording": inst.get("recording")})
            inst.update(status="pending", reason="retrying a drop")
    _sweep_orphans(out, instances, echo)
    record_file = out / layout.BUILD_RECORD
    lock = threading.Lock()
    data: dict[str, Any] = {"request": req.key(), "opsbench_version": __version__,
                            "started_at": (previous or {}).get("started_at", round(started, 3)),
                            "instances": instances, "dropped_draws": dropped_draws}
    if superseded:
        data["superseded"] = superseded

    def save() -> None:
        with lock:
            layout.write_json(record_file, data)

    save()
    if req.reuse is not None:
        _reuse(req.reuse, [i for i in instances if i["status"] not in FINAL], out, echo)
        save()
    todo = interleaved([i for i in instances if i["status"] not in FINAL])
    by_id = {i["id"]: i for i in instances}
    if todo:
        echo(f"recording {len(todo)} instance(s) ({len(instances) - len(todo)} already decided) into {out}")
        scns: list[Scenario] = [find_scenario(str(out / layout.SCENARIOS / i["id"])) for i in todo]

        def on_recording(rec: Recording) -> None:
            _decide(by_id[rec.scenario], rec, out)
            echo(f"  {rec.scenario}: {by_id[rec.scenario]['status']}"
                 + (f" ({by_id[rec.scenario]['reason'][:200]})" if by_id[rec.scenario].get("reason") else
                    f" in {rec.seconds.get('total', 0):.0f}s"))
            save()

        record(scns, out / layout.SNAPSHOTS, 1, progress, on_recording, req.window_cap_s, parallel=req.parallel)
    replay_dirs = _measure(req, out, [i for i in instances if i["status"] == VERIFIED], progress, echo, save)
    for inst in instances:
        if inst["status"] == DROPPED:
            shutil.rmtree(out / layout.SCENARIOS / inst["id"], ignore_errors=True)
    data["leak_check"] = leak_check(out, _leak_needles(req, instances), replay_dirs)
    data["yields"] = yields(instances, dropped_draws)
    write_index(out, instances, generated=bool(req.templates))
    data["finished_at"] = round(time.time(), 3)
    save()
    return data


def _reuse(folder: Path, instances: list[dict[str, Any]], out: Path, echo: Callable[[str], None]) -> None:
    """Copy into the corpus, for each instance with one in `folder`, its newest snapshot that verifies (files and
    checksums, recorder, the scenario at its current version); those instances are verified by that recording."""
    from orchestrator.snapshots import format as fmt

    newest: dict[str, tuple[float, Path]] = {}
    for child in sorted(p for p in folder.iterdir() if p.is_dir() and (p / fmt.INDEX).is_file()):
        try:
            info = fmt.verify(child)
        except OpsBenchError as exc:
            echo(f"  not reused: {child.name}: {exc}")
            continue
        if info.scenario_id not in newest or newest[info.scenario_id][0] < info.frozen_now:
            newest[info.scenario_id] = (info.frozen_now, child)
    for inst in instances:
        if inst["id"] not in newest:
            continue
        source = newest[inst["id"]][1]
        target = out / layout.SNAPSHOTS / source.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
        inst.update(status=VERIFIED, reason="", snapshot=f"{layout.SNAPSHOTS}/{source.name}", bytes=size,
                    recording={"reused": str(source), "bytes": size})
    echo(f"reused {sum('reused' in (i.get('recording') or {}) for i in instances)} recorded snapshot(s) from {folder}")


def interleaved(instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One instance of each template in turn (the templates in their order): a build cut short has proven a few
    instances of every template, so its yields say something about all of them."""
    rank: dict[str, int] = {}
    keyed = []
    for position, inst in enumerate(instances):
        template = str(inst.get("template") or "")
        keyed.append((rank.get(template, 0), position, inst))
        rank[template] = rank.get(template, 0) + 1
    return [inst for _, _, inst in sorted(keyed, key=lambda k: (k[0], k[1]))]


def _spec_sha(out: Path, iid: str) -> str | None:
    """sha256 of an instance's spec and ground truth as written in the corpus (None when it has no folder)."""
    folder = out / layout.SCENARIOS / iid
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(file.relative_to(folder).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _forget_recording(out: Path, inst: dict[str, Any]) -> None:
    """Remove an instance's snapshot from the corpus (it is recorded again, or the instance leaves)."""
    if inst.get("snapshot"):
        shutil.rmtree(out / str(inst["snapshot"]), ignore_errors=True)
    for key in ("snapshot", "bytes", "replays"):
        inst.pop(key, None)


def _reconcile(out: Path, before: dict[str, dict[str, Any]], instances: list[dict[str, Any]],
               echo: Callable[[str], None]) -> list[dict[str, Any]]:
    """Instances of the previous build that the new draw no longer holds (a template edited or removed): their spec
    and snapshot leave the corpus, and they are listed as superseded (so no verified recording is silently lost)."""
    drawn = {i["id"] for i in instances}
    gone = []
    for iid, inst in before.items():
        if iid in drawn:
            continue
        _forget_recording(out, inst)
        shutil.rmtree(out / layout.SCENARIOS / iid, ignore_errors=True)
        gone.append({"id": iid, "template": inst.get("template"), "draw": inst.get("draw"),
                     "status": inst.get("status"), "reason": "no longer drawn: its template or the count changed"})
    if gone:
        echo(f"{len(gone)} instance(s) of the previous build are no longer drawn and leave the corpus "
             f"({sum(g['status'] == VERIFIED for g in gone)} of them verified)")
    return gone


def _decide(inst: dict[str, Any], rec: Recording, out: Path) -> None:
    """An instance's status from its recording: verified only when the snapshot was made and the clean-up (removal,
    recovery, leftover check) came back clean. An interrupted one stays pending, to be recorded on resume. The spec's
    hash is kept: a resumed build records again an instance whose spec changed since."""
    inst["recording"] = {"status": rec.status, "seconds": rec.seconds, "bytes": rec.bytes, "run_id": rec.run_id,
                         "recovered": rec.recovered, "leftovers": rec.leftovers}
    inst["spec_sha256"] = _spec_sha(out, inst["id"])
    if rec.clean:
        inst.update(status=VERIFIED, reason="", snapshot=f"{layout.SNAPSHOTS}/{rec.snapshot_id}", bytes=rec.bytes)
        return
    if rec.path:
        shutil.rmtree(rec.path, ignore_errors=True)
    if rec.status in ("interrupted", "not-injected"):
        # Nothing of the instance ran (cut short, or its environment did not deploy or was not healthy before the
        # injection): that says nothing of the instance, which is recorded on resume.
        inst.update(status="pending", reason=rec.reason if rec.status == "not-injected" else "interrupted")
        return
    inst.update(status=DROPPED, reason=rec.reason or rec.status, snapshot=None)


def _measure(req: BuildRequest, out: Path, verified: list[dict[str, Any]], progress: Progress,
             echo: Callable[[str], None], save: Callable[[], None]) -> list[Path]:
    """Replay each verified instance's snapshot `req.replays` times with its baseline agent (instances that already
    have their replays keep them); returns the replay trials' run directories."""
    todo = [i for i in verified if len(i.get("replays", {}).get("passed", [])) < req.replays]
    dirs = [d for i in verified for r in i.get("replays", {}).get("run_ids", []) if (d := _run_dir(r))]
    if not todo or req.replays == 0:
        return dirs
    echo(f"replaying the baseline agent {req.replays} time(s) on {len(todo)} snapshot(s)")
    by_snapshot = {Path(i["snapshot"]).name: i for i in todo}
    for inst in todo:
        inst["replays"] = {"agent": "", "passed": [], "statuses": [], "run_ids": []}

    def on_record(rec: ReplayRecord) -> None:
        inst = by_snapshot[rec.snapshot_id]
        inst["replays"]["agent"] = rec.agent
        inst["replays"]["passed"].append(rec.passed)
        inst["replays"]["statuses"].append(rec.status)
        inst["replays"]["run_ids"].append(rec.run_id)
        if (d := _run_dir(rec.run_id)) is not None:
            dirs.append(d)
        save()

    replay([out / i["snapshot"] for i in todo], None, req.replays, req.parallel, progress=progress, purpose="verify",
           on_record=on_record)
    return dirs


def yields(instances: list[dict[str, Any]], dropped_draws: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Per template (or "fixed"): instances drawn, verified, dropped, retried after an earlier drop, and the yield
    (verified / decided: a retried instance counts by its last recording)."""
    out: dict[str, dict[str, Any]] = {}
    for inst in instances:
        row = out.setdefault(inst["template"] or "fixed", {"drawn": 0, "verified": 0, "dropped": 0, "pending": 0,
                                                          "retried": 0, "reasons": []})
        row["drawn"] += 1
        row["retried"] += bool(inst.get("earlier_drops"))
        key = inst["status"] if inst["status"] in FINAL else "pending"
        row[key] += 1
        if inst["status"] == DROPPED:
            row["reasons"].append(f"{inst['id']}: {inst.get('reason', '')[:200]}")
    for template, row in out.items():
        decided = row["verified"] + row["dropped"]
        row["yield"] = round(row["verified"] / decided, 3) if decided else None
        row["dropped_at_generation"] = sum(1 for d in dropped_draws if d["template"] == template)
    return out


def write_index(out: Path, instances: list[dict[str, Any]], generated: bool) -> dict[str, Any]:
    """`corpus.json`: the verified instances and their snapshots, domains, levels and sizes, and the corpus checksum.
    Nothing in it names a template, a draw, a mechanism, a class or a seed (each instance's class goes to the
    owner's record)."""
    rows = []
    for inst in instances:
        if inst["status"] != VERIFIED:
            continue
        scn = find_scenario(str(out / layout.SCENARIOS / inst["id"]))
        meta = scn.data["metadata"]
        inst["class"] = meta["class"]  # the owner's: a class names the mechanism ("crash-loop")
        rows.append({"id": inst["id"], "snapshot": inst["snapshot"], "domain": meta["domain"],
                     "level": meta["complexity"]["level"], "complexity": meta["complexity"]["value"],
                     "bytes": inst.get("bytes", 0)})
    index = {"format_version": layout.FORMAT_VERSION, "kind": "opsbench-corpus", "opsbench_version": __version__,
             "generated": generated, "created_at": round(time.time(), 3),
             "instances": sorted(rows, key=lambda r: r["id"]), "checksum": layout.checksum(out)}
    layout.write_json(out / layout.CORPUS_INDEX, index)
    return index
