"""CUJBench outcome metrics for a diagnosis (CUJBench §III-B, Eqs. 9-13).

The ground truth's root-cause entities carry ``layer`` and ``faultType``; the agent's
root-cause entities carry ``layer`` and ``fault_type``. Component c is the set of root-cause
entities (resolved through ids and aliases, so multi-fault scenarios need every one); layer l
and type t are separate predictions, compared as the set of values given for the claimed root
causes against the set of true ones, after canonicalisation (case, whitespace, '-' vs '_'):

* A@1 = 1[c^ = c* and t^ = t*];  CM, LM, TM: per-field matches;
* PCE = (CM + LM + TM) / 3;  PCW = w_c CM + w_l LM + w_t TM, weights 0.5/0.2/0.3 by default;
* ER = |I^ and I*| / |I*| over evidence identifiers, None when the ground truth lists none.

All are None when the ground truth lacks the field they need (so averages skip them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PCW_WEIGHTS = (0.5, 0.2, 0.3)  # component, layer, type (CUJBench Eq. 12)


def canonical(text: Any) -> str:
    """Lower case, inner whitespace collapsed, '-' and ' ' treated as '_' (process-down == process_down)."""
    return "_".join(str(text).casefold().replace("-", " ").replace("_", " ").split())


def _evidence_match(cited: str, truth: str) -> bool:
    """A cited id matches a true one when equal or when it extends it with ':' (log:cart:17 ~ log:cart)."""
    c, t = cited.strip().casefold(), truth.strip().casefold()
    return c == t or c.startswith(t + ":")


def evidence_recall(cited: Sequence[str], truth: Sequence[str]) -> float | None:
    """ER (Eq. 13): the fraction of true evidence ids that some cited id matches."""
    if not truth:
        return None
    return sum(1 for t in truth if any(_evidence_match(c, t) for c in cited)) / len(truth)


def cuj_metrics(output: Mapping[str, Any], ground_truth: Mapping[str, Any], names: Mapping[str, str],
                weights: tuple[float, float, float] = PCW_WEIGHTS) -> dict[str, float | None]:
    """CUJBench outcome metrics of one valid diagnosis; ``names`` maps case-folded names to ids."""
    truth = {e["id"]: e for e in ground_truth.get("entities") or [] if e.get("rootCause")}
    er = evidence_recall(list(output.get("evidence") or []), list(ground_truth.get("evidence") or []))
    none: dict[str, float | None] = {"a_at_1": None, "component_match": None, "layer_match": None,
                                     "type_match": None, "pce": None, "pcw": None, "evidence_recall": er}
    if not truth:
        return none
    claimed: dict[str, Mapping[str, Any]] = {}
    for ent in output.get("entities") or []:
        if ent.get("root_cause"):
            claimed.setdefault(names.get(str(ent["id"]).casefold(), str(ent["id"])), ent)
    cm = float(set(claimed) == set(truth))

    def field_match(gt_key: str, out_key: str) -> float | None:
        # Each field is its own prediction (CUJBench): the layers (types) the agent gives for
        # its root causes must be those of the true root causes, whichever entity it blamed.
        if any(gt_key not in e for e in truth.values()):
            return None
        said = {canonical(e.get(out_key, "")) for e in claimed.values()}
        return float(bool(claimed) and said == {canonical(e[gt_key]) for e in truth.values()})

    lm, tm = field_match("layer", "layer"), field_match("faultType", "fault_type")
    fields = [cm, lm, tm]
    return {
        "a_at_1": None if tm is None else float(cm == 1.0 and tm == 1.0),
        "component_match": cm,
        "layer_match": lm,
        "type_match": tm,
        "pce": None if None in fields else sum(f for f in fields if f is not None) / 3,
        "pcw": None if lm is None or tm is None else weights[0] * cm + weights[1] * lm + weights[2] * tm,
        "evidence_recall": er,
    }
