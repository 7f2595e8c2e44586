"""The dataset card of a built corpus (`opsbench corpus card`): what is in it, how it was proven, what it costs and
how hard it is for the baseline agents, in figures read from the corpus itself, never written by hand.

Read from `corpus.json` (instances, levels, sizes, checksum) and, when the owner kept it, `build.json` (templates,
mechanisms, yields, verification times, the baseline replays, the leak check). Several corpora side by side (a dev
split, a held-out split, the fixed scenarios frozen as a corpus) compare the baseline's pass@1 per level: where the
baseline does much better on the fixed set than on fresh instances, that gap is what the fixed set hid.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from orchestrator.corpus import layout

LEVELS = ("Easy", "Medium", "Hard")


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def instance_rates(build: dict[str, Any] | None, index: dict[str, Any]) -> dict[str, float]:
    """Each indexed instance's share of passing baseline replays (an instance without replays is left out)."""
    replays = {i["id"]: i.get("replays") or {} for i in (build or {}).get("instances", [])}
    out = {}
    for row in index["instances"]:
        passed = [p for p in replays.get(row["id"], {}).get("passed", []) if p is not None]
        if passed:
            out[row["id"]] = sum(bool(p) for p in passed) / len(passed)
    return out


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def pass_rates(build: dict[str, Any] | None, index: dict[str, Any]) -> dict[str, float | None]:
    """The baseline's pass@1 per level and overall: the mean over instances of each instance's share of passing
    replays (an instance without replays does not count)."""
    rates = instance_rates(build, index)
    by_level: dict[str, list[float]] = {}
    for row in index["instances"]:
        if row["id"] in rates:
            by_level.setdefault(row["level"], []).append(rates[row["id"]])
            by_level.setdefault("all", []).append(rates[row["id"]])
    return {level: _mean(by_level.get(level, [])) for level in (*LEVELS, "all")}


def distractor_rates(root: Path, build: dict[str, Any] | None, index: dict[str, Any]) -> dict[str, Any] | None:
    """The baseline's pass@1 on the instances whose faults include a distractor (a benign change the ground truth
    lists as a non-cause) and on the others, read from the instance specs; None when no instance has one. What a
    distractor costs the baseline, measured rather than assumed."""
    from orchestrator.yamlfile import read_yaml

    groups: dict[str, list[float]] = {"with": [], "without": []}
    for iid, rate in instance_rates(build, index).items():
        spec = root / layout.SCENARIOS / iid / layout.SPEC_FILE
        if not spec.is_file():
            continue
        faults = (read_yaml(spec) or {}).get("faults") or []
        groups["with" if any(f.get("distractor") for f in faults) else "without"].append(rate)
    if not groups["with"]:
        return None
    return {"with": _mean(groups["with"]), "without": _mean(groups["without"]),
            "instances_with": len(groups["with"]), "instances_without": len(groups["without"])}


def card(root: Path) -> dict[str, Any]:
    """The card of the corpus at `root` as data."""
    index = layout.read_index(root)
    build = layout.read_build(root)
    rows = index["instances"]
    sizes = [int(r.get("bytes", 0)) for r in rows]
    out: dict[str, Any] = {
        "corpus": str(root), "opsbench_version": index.get("opsbench_version"), "generated": index.get("generated"),
        "created_at": index.get("created_at"), "instances": len(rows),
        "checksum": index.get("checksum"), "checksum_ok": layout.checksum(root) == index.get("checksum"),
        "by_domain": dict(Counter(r["domain"] for r in rows)),
        "by_level": {lvl: n for lvl in LEVELS if (n := sum(r["level"] == lvl for r in rows))},
        "bytes": {"total": sum(sizes), "median": int(statistics.median(sizes)) if sizes else 0,
                  "max": max(sizes, default=0)},
        "baseline_pass_at_1": pass_rates(build, index),
        "baseline_pass_at_1_by_distractor": distractor_rates(root, build, index),
    }
    if build is None:
        out["build"] = None
        return out
    kept = {r["id"] for r in rows}
    instances = build["instances"]
    out["by_class"] = dict(Counter(i.get("class", "?") for i in instances if i["id"] in kept))
    out["by_mechanism"] = dict(Counter(i["mechanism"] for i in instances if i["id"] in kept))
    out["yields"] = build.get("yields", {})
    secs = [i["recording"]["seconds"] for i in instances
            if i.get("recording") and "seconds" in i["recording"] and i["id"] in kept]
    out["verification"] = {
        "drawn": len(instances), "verified": len(kept),
        "dropped": sum(i["status"] == "dropped" for i in instances),
        "dropped_at_generation": len(build.get("dropped_draws", [])),
        "median_seconds": {k: _median([float(s[k]) for s in secs if k in s])
                           for k in ("lifecycle", "snapshot", "cleanup", "total")},
        "replays_per_instance": max((len(i.get("replays", {}).get("passed", [])) for i in instances), default=0),
        "baseline_agents": sorted({i["replays"]["agent"] for i in instances if i.get("replays", {}).get("agent")}),
    }
    out["leak_check"] = build.get("leak_check")
    out["build_seconds"] = (round(build["finished_at"] - build["started_at"], 1)
                            if build.get("finished_at") and build.get("started_at") else None)
    return out


def agent_label(command: str) -> str:
    """`python -m orchestrator.agents.heuristic` as `orchestrator.agents.heuristic`; any other command as given."""
    words = command.split()
    return words[words.index("-m") + 1] if "-m" in words[:-1] else command


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(cards: list[dict[str, Any]]) -> str:
    """The first card in Markdown, then the baseline's pass@1 per level of every card given, side by side."""
    c = cards[0]
    lines = [f"# Corpus card: {Path(c['corpus']).name}", "",
             f"- {c['instances']} instance(s), {'generated from templates' if c['generated'] else 'fixed scenarios'};"
             f" OpsBench {c['opsbench_version']}",
             f"- checksum `{c['checksum']}` "
             f"({'matches the files' if c['checksum_ok'] else 'DOES NOT match the files'})",
             f"- size {c['bytes']['total'] / 1e6:.1f} MB (median snapshot {c['bytes']['median'] / 1e6:.1f} MB, "
             f"largest {c['bytes']['max'] / 1e6:.1f} MB)", ""]
    lines += ["## Counts", ""]
    for title, key in (("Domain", "by_domain"), ("Class", "by_class"), ("Level", "by_level"),
                       ("Mechanism", "by_mechanism")):
        if c.get(key):
            lines += [*_table([title, "Instances"], [[k, str(v)] for k, v in sorted(c[key].items())]), ""]
    if c.get("build") is None and "verification" not in c:
        lines += ["(No build record: the corpus was handed over without `build.json`, so templates, mechanisms, yields "
                  "and verification figures are not known here.)", ""]
    else:
        v = c["verification"]
        med = v["median_seconds"]
        lines += ["## Verification", "",
                  f"Each instance was recorded live once; the recording's manifestation, recovery and leftover checks "
                  f"are its proof. {v['drawn']} drawn, {v['verified']} verified, {v['dropped']} dropped "
                  f"({v['dropped_at_generation']} draw(s) dropped at generation: no alert or a repeat). Median seconds "
                  f"per recording: to handover {med['lifecycle']}, snapshot {med['snapshot']}, clean-up "
                  f"{med['cleanup']}, in all {med['total']}.", ""]
        yields = c.get("yields") or {}
        if yields:
            lines += _table(["Template", "Drawn", "Verified", "Dropped", "Retried", "Not recorded yet", "Yield"],
                            [[t, str(y["drawn"]), str(y["verified"]), str(y["dropped"]), str(y.get("retried", 0)),
                              str(y.get("pending", 0)), "-" if y["yield"] is None else f"{y['yield']:.0%}"]
                             for t, y in sorted(yields.items())])
            lines += [""]
            reasons = [r for y in yields.values() for r in y.get("reasons", [])]
            if reasons:
                lines += ["Dropped:", "", *(f"- {r}" for r in reasons), ""]
        leak = c.get("leak_check") or {}
        if leak:
            lines += [f"Leak check: {leak['files']} agent-facing file(s) searched for {leak['needles']} string(s) "
                      f"(template ids, fault names and roles, mechanisms, the seed): "
                      f"{len(leak['leaks'])} found.", ""]
    agents = ", ".join(agent_label(a) for a in (c.get("verification") or {}).get("baseline_agents") or []) \
        or "the baseline agents"
    lines += ["## Difficulty", "",
              f"pass@1 of {agents} in replay, per level (the mean over instances of each one's share of passing "
              "replays; `-`: no instance of that level):", ""]
    lines += _table(["Corpus", "Instances", *LEVELS, "All"],
                    [[Path(k["corpus"]).name, str(k["instances"]), *(_rate(k["baseline_pass_at_1"].get(lvl))
                                                                     for lvl in (*LEVELS, "all"))] for k in cards])
    split = [k for k in cards if k.get("baseline_pass_at_1_by_distractor")]
    if split:
        lines += ["", "pass@1 with a distractor among the faults (a benign change at the incident's time, a non-cause "
                  "in the ground truth) and without:", ""]
        lines += _table(["Corpus", "With (instances)", "Without (instances)"],
                        [[Path(k["corpus"]).name, f"{_rate(d['with'])} ({d['instances_with']})",
                          f"{_rate(d['without'])} ({d['instances_without']})"]
                         for k in split if (d := k["baseline_pass_at_1_by_distractor"])])
    return "\n".join(lines) + "\n"
