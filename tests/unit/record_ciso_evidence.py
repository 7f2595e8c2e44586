"""Copy the evidence of completed CISO runs into tests/unit/data/ciso_evidence (see test_ciso_recorded.py).

Usage: python tests/unit/record_ciso_evidence.py RUNS_DIR [RUNS_DIR...]. For each local CISO scenario, the
newest run whose evaluation ran the fetcher to completion (ce = 1) is kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "ciso_evidence"


def main(argv: list[str]) -> int:
    best: dict[str, tuple[str, dict[str, object]]] = {}
    for runs in argv:
        # Runs, and campaign trials under their host run (runs/<host>/trials/<id>), oldest first.
        found = [p.parents[2] for p in Path(runs).glob("**/evaluation/ciso/evidence.json")]
        for run in sorted(found, key=lambda r: r.name):
            state, evidence, scores = run / "run.json", run / "evaluation" / "ciso" / "evidence.json", \
                run / "evaluation" / "ciso.json"
            if not (state.is_file() and evidence.is_file() and scores.is_file()):
                continue
            meta = json.loads(state.read_text())
            scenario = meta.get("scenario") or meta.get("scenario_id")
            if not scenario or not str(scenario).startswith("ciso-") or "-k8s-" in str(scenario):
                continue
            if json.loads(scores.read_text()).get("ce") != 1:
                continue
            best[str(scenario)] = (run.name, json.loads(evidence.read_text()))
    DATA.mkdir(parents=True, exist_ok=True)
    for scenario, (run_id, evidence) in sorted(best.items()):
        (DATA / f"{scenario}.json").write_text(json.dumps(
            {"scenario": scenario, "run_id": run_id, "evidence": evidence}, indent=1, sort_keys=True) + "\n")
    print(f"{len(best)} scenario(s) recorded in {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
