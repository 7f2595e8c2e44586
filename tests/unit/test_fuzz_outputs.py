"""Property-based fuzzing of agent outputs (issue 11, item 3): at least 1,000 generated outputs.

An agent may write anything into its output file. Each generated case is one of: raw bytes (rarely JSON), any
JSON value, or a JSON object shaped like the output schemas (their keys, with values that are sometimes right and
sometimes of the wrong type or out of range); the same file is also offered as the agent's own trajectory. It is
scored by every deterministic scorer the evaluator roles use: diagnosis (fault localisation, NTAM and the CUJBench
metrics, on the shop's topology), mitigation, FinOps (answers and anomaly ranking), the CISO artifact picker, the
process metrics, and the LLM judge's input preparation (judge off). The property: no scorer raises; each answers
`scored`, `malformed` or `no_submission`; a rejected output carries a reason that names where it failed; every
metric is a number in [0, 1] or None.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzzing import cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import paths
from orchestrator.evaluation.ciso import pick_artifacts
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.evaluation.finops import score_finops
from orchestrator.evaluation.judge import judge_fields
from orchestrator.evaluation.mitigation import score_mitigation
from orchestrator.evaluation.process import score_process

CASES = cases("OPSBENCH_FUZZ_CASES", 1000)
COUNT: dict[str, int] = {"cases": 0, "scored": 0, "malformed": 0, "no_submission": 0}
STATUSES = {"scored", "malformed", "no_submission"}


def _gt(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((paths.SPECS_DIR / name / "ground_truth.yaml").read_text())
    return data


SHOP_GT = _gt("shop-cart-down")
HEALTHY_GT = _gt("shop-healthy-baseline")
FINOPS_GTS = [_gt("finops-top-applications"), _gt("finops-anomaly-ranking"), _gt("finops-anomaly-detection")]
TOPOLOGY = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())
NAMES = [e["id"] for e in TOPOLOGY["entities"]] + ["cart", "nginx", "", "CART-1", "nothing", "prometheus"]

scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats() | st.text(max_size=20)
           | st.sampled_from(NAMES))
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=10) | st.sampled_from(NAMES), inner, max_size=4),
                        max_leaves=10)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly (19 in 20) the right shape, sometimes anything at all."""
    return st.integers(0, 19).flatmap(lambda n: anything if n == 0 else good)


entity = st.fixed_dictionaries({"id": maybe(st.sampled_from(NAMES))}, optional={
    "root_cause": maybe(st.booleans()), "layer": maybe(st.text(max_size=12)),
    "fault_type": maybe(st.sampled_from(["process_down", "memory_leak", "x"]))})
propagation = st.fixed_dictionaries({"source": maybe(st.sampled_from(NAMES)), "target": maybe(st.sampled_from(NAMES))},
                                    optional={"condition": maybe(st.text(max_size=20)),
                                              "effect": maybe(st.text(max_size=20))})
day = st.dates().map(str) | st.sampled_from(["2024-09-13", "2024-09-17", "2024-09-20", "not a day", ""])
anomaly = st.fixed_dictionaries({}, optional={"start": maybe(day), "end": maybe(day), "id": maybe(st.text(max_size=8)),
                                              "kind": maybe(st.sampled_from(["spike", "level_shift"])),
                                              "rank": maybe(st.integers(-3, 10)), "cost": maybe(st.floats()),
                                              "excess_cost": maybe(st.floats())})
row = st.dictionaries(st.sampled_from(["application", "total_cost", "month", "x"]), scalars, max_size=3)
artifact = st.fixed_dictionaries({}, optional={"name": maybe(st.sampled_from(["fetcher.yml", "checker.rego", "x"])),
                                               "kind": maybe(st.sampled_from(["ansible_playbook", "rego", "other"])),
                                               "content": maybe(st.text(max_size=40))})
usage = st.fixed_dictionaries({}, optional={"input_tokens": maybe(st.integers(-5, 10**9)),
                                            "output_tokens": maybe(st.integers(-5, 10**9))})
shaped = st.fixed_dictionaries({"entities": maybe(st.lists(entity, max_size=5))}, optional={
    "schema": st.sampled_from(["opsbench/diagnosis/v1", "opsbench/mitigation/v1", "other"]),
    "incident": maybe(st.booleans()),
    "propagations": maybe(st.lists(propagation, max_size=4)),
    "alerts_explained": maybe(st.lists(st.sampled_from(["ServiceDown", "CustomerErrorsHigh", "x"]) | scalars,
                                       max_size=3)),
    "evidence": maybe(st.lists(st.text(max_size=20) | st.sampled_from(SHOP_GT["evidence"]), max_size=3)),
    "explanation": maybe(st.text(max_size=60)),
    "actions": maybe(st.lists(st.text(max_size=20) | anything, max_size=3)),
    "plan": maybe(st.text(max_size=60)),
    "answers": maybe(st.dictionaries(st.sampled_from(["top_applications", "x"]),
                                     st.lists(row, max_size=4) | anything, max_size=2)),
    "anomalies": maybe(st.lists(anomaly, max_size=5)),
    "artifacts": maybe(st.lists(artifact, max_size=3)),
    "posture": maybe(st.sampled_from(["compliant", "noncompliant", "x"])),
    "usage": maybe(usage),
})
documents = st.one_of(
    st.binary(max_size=200),
    anything.map(lambda v: json.dumps(v).encode()),
    shaped.map(lambda v: json.dumps(v).encode()),
    shaped.map(lambda v: json.dumps(v).encode()),
    shaped.map(lambda v: json.dumps(v).encode()),
    st.just(None),  # no file at all
)


def _metrics_in_range(scores: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = scores.get(key)
        assert value is None or (isinstance(value, int | float) and not math.isnan(value) and 0.0 <= value <= 1.0), (
            key, value, scores)


def _status(scores: dict[str, Any]) -> str:
    status = scores["status"]
    assert status in STATUSES, scores
    if status != "scored":
        assert scores.get("reason"), scores
    if status == "malformed" and "schema" in scores["reason"]:
        assert " at " in scores["reason"], scores  # names the failing location, e.g. `at entities/0/id: ...`
    return str(status)


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(document=documents, finops_gt=st.sampled_from(FINOPS_GTS))
def test_no_agent_output_breaks_a_scorer(tmp_path: Path, document: bytes | None, finops_gt: dict[str, Any]) -> None:
    out = tmp_path / "output.json"
    out.unlink(missing_ok=True)
    if document is not None:
        out.write_bytes(document)
    COUNT["cases"] += 1

    diag = score_diagnosis(out, SHOP_GT, TOPOLOGY)
    COUNT[_status(diag)] += 1
    _metrics_in_range(diag, ("fl_pass", "fl_precision", "fl_recall", "ntam_fl", "ntam_fpc", "a_at_1", "pce", "pcw",
                             "evidence_recall", "alerts_explained_recall"))
    _status(score_diagnosis(out, HEALTHY_GT, TOPOLOGY))

    mitig = score_mitigation(out, {"ok": True, "quiet_since_epoch": 20.0}, [],
                             {"manifestation": {"ended_at": 10.0}})
    _status(mitig)
    _metrics_in_range(mitig, ("alerts_cleared", "mitigation_pass"))

    fin = score_finops(out, finops_gt)
    _status(fin)
    assert fin["finops_pass"] in (0, 1), fin
    _metrics_in_range(fin, tuple(k for k in fin if k.endswith(("precision", "recall", "f1", "rank_score",
                                                                  "field_accuracy"))))

    process = score_process(out, out, SHOP_GT)  # the same bytes as a trajectory file, too
    assert process["trajectory_bad_lines"] >= 0

    parsed: Any = None
    if document is not None:
        try:
            parsed = json.loads(document)
        except ValueError:
            parsed = None
    if isinstance(parsed, dict):
        arts = pick_artifacts(parsed)
        assert arts.fetcher is None or isinstance(arts.fetcher, str)
        assert arts.checker is None or isinstance(arts.checker, str)
    judged = judge_fields(parsed, SHOP_GT, None)
    assert judged["status"] == "skipped", judged


def test_fuzz_ran_every_case() -> None:
    """Runs after the property (file order): every generated case reached the scorers."""
    if COUNT["cases"] == 0:
        pytest.skip("the property test was not selected in this session (e.g. -k), nothing to count")
    assert COUNT["cases"] >= CASES, COUNT
    assert COUNT["scored"] > 0 and COUNT["malformed"] > 0 and COUNT["no_submission"] > 0, COUNT
    print(f"output fuzz: {COUNT}")
