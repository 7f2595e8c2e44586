"""Time NTAM scoring: ``python -m orchestrator.evaluation.bench_scoring [--n 10000] [--seed 0]``.

Scores N synthetic agent outputs (random entities, root-cause flags, propagations, aliases and
unknown names, plus the exact answer) against the ground truth of scenario_specs/shop-cart-down
on the shop topology, once with the one-shot :func:`ntam` (which prepares the ground truth and
topology every call) and once with a prepared :class:`NtamScorer`; then the whole per-run path,
:func:`score_diagnosis` on output files (read, JSON Schema validation, fault localisation, NTAM,
CUJBench metrics). Prints total and per-output time for each and the mean scores.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.evaluation.ntam import NtamScorer, TopologyGraph, ntam
from orchestrator.evaluation.stats import mean_stderr

SCENARIO = "shop-cart-down"


def load_shop() -> tuple[dict[str, Any], dict[str, Any]]:
    """(ground truth of shop-cart-down, shop topology)."""
    truth = yaml.safe_load((paths.SPECS_DIR / SCENARIO / "ground_truth.yaml").read_text())
    topology = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())
    return truth, topology


def synthetic_outputs(n: int, truth: dict[str, Any], topology: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    """``n`` agent outputs in the diagnosis-output format, deterministic for a seed."""
    rng = random.Random(seed)
    names = [e["id"] for e in topology["entities"]]
    names += [a for e in truth["entities"] for a in e.get("aliases", [])] + ["unknown-svc", "DB"]
    exact = {"entities": [{"id": e["id"], "root_cause": bool(e.get("rootCause"))} for e in truth["entities"]],
             "propagations": [{"source": p["source"], "target": p["target"]} for p in truth["propagations"]]}
    outputs = []
    for i in range(n):
        if i % 10 == 0:
            outputs.append(exact)
            continue
        chosen = rng.sample(names, rng.randint(1, 6))
        pairs = [(chosen[j], chosen[j + 1]) for j in range(len(chosen) - 1) if rng.random() < 0.7]
        outputs.append({"entities": [{"id": name, "root_cause": j == 0 or rng.random() < 0.1}
                                     for j, name in enumerate(chosen)],
                        "propagations": [{"source": s, "target": t} for s, t in pairs]})
    return outputs


def _timed(label: str, score: Any, outputs: Sequence[Any]) -> list[dict[str, Any]]:
    start = time.perf_counter()
    results = [score(o) for o in outputs]
    total = time.perf_counter() - start
    print(f"{label:<34} total {total:8.3f} s   per output {total / len(outputs) * 1e6:9.1f} us")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000, help="number of synthetic outputs (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the synthetic outputs")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    truth, topology = load_shop()
    outputs = synthetic_outputs(args.n, truth, topology, args.seed)
    print(f"NTAM scoring of {args.n} synthetic outputs against {SCENARIO} "
          f"({len(topology['entities'])} entities, {len(topology['edges'])} edges)")
    one_shot = _timed("ntam() (prepares every call)", lambda o: ntam(truth, o, topology), outputs)
    start = time.perf_counter()
    scorer = NtamScorer(truth, TopologyGraph(topology))
    print(f"{'NtamScorer preparation':<34} total {time.perf_counter() - start:8.3f} s")
    prepared = _timed("NtamScorer.score (prepared once)", scorer.score, outputs)
    assert one_shot == prepared, "the prepared scorer disagrees with the one-shot call"
    for key in ("ntam_fl", "ntam_fpc"):
        mean, se = mean_stderr(r[key] for r in prepared)
        print(f"mean {key}: {mean:.4f} ± {se:.4f}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, output in enumerate(outputs):
            files.append(Path(tmp) / f"{i}.json")
            files[-1].write_text(json.dumps(output))
        full = _timed("score_diagnosis (files, all metrics)", lambda f: score_diagnosis(f, truth, topology), files)
    assert [r["ntam_fl"] for r in full] == [r["ntam_fl"] for r in prepared], "score_diagnosis disagrees with NTAM"
    mean, se = mean_stderr(r["fl_pass"] for r in full)
    print(f"mean fl_pass: {mean:.4f} ± {se:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
