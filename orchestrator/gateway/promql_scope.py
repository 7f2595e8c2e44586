"""Keeping PromQL on the application: the monitoring stack's own series and the machinery's are out of scope.

The run's Prometheus also scrapes itself, the load generator, the exporters and the container exporter (whose
series name every container, fault helpers included). A query is parsed (promql-parser, the Rust parser's Python
binding), so a selector cannot hide a name in a regular expression:

* a selector naming a monitoring-stack metric (``prometheus_*``, ``alertmanager_*``, ``promhttp_*``) is denied,
  by name, by ``__name__="..."`` or by a ``__name__`` regular expression that matches one of the metric names
  this Prometheus has;
* a matcher on a label that names entities (``service``, ``container``, ``instance_id``, ``job``) is denied
  when it equals a machinery name, or is a regular expression matching one of the values this Prometheus has
  for that label that is machinery;
* series the answer still carries with machinery labels (e.g. from ``{service!="cart"}``) are left out of the
  result. What no filter can undo is an aggregate without those labels (``sum(container_pids)`` counts the load
  generator too): a number, never a name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import promql_parser

from .errors import denied, invalid
from .scope import is_internal

INTERNAL_METRIC = re.compile(r"^(?:prometheus|alertmanager|promhttp)_")
ENTITY_LABELS = ("service", "container", "instance_id", "job")
MONITORING_JOBS = frozenset({"prometheus", "alertmanager"})

LabelValues = Callable[[str], Iterable[str]]
"""Values a label has in the run's Prometheus (``/api/v1/label/<name>/values``)."""


def _selectors(expr: Any) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(expr, pre_visit=visit)
    return found


def _matchers(selector: Any) -> list[Any]:
    groups = selector.matchers
    return [*groups.matchers, *(m for group in groups.or_matchers for m in group)]


def _internal_value(label: str, value: str) -> bool:
    # A job is machinery only when it scrapes the monitoring stack: the `containers` job's series describe the
    # application's containers too (their `container`/`service` labels say whose).
    return value.lower() in MONITORING_JOBS if label == "job" else is_internal(value)


def _regex(field_value: str) -> re.Pattern[str]:
    try:
        return re.compile(field_value)
    except re.error:  # RE2 syntax Python does not share: let Prometheus judge it, match nothing here
        return re.compile(r"(?!)")


def check_query(query: str, label_values: LabelValues) -> None:
    """Raise `invalid` for a query that does not parse, `denied` for one that reaches out of scope."""
    try:
        expr = promql_parser.parse(query)
    except ValueError as exc:
        raise invalid("query", f"not valid PromQL: {exc}") from None
    for selector in _selectors(expr):
        names = [selector.name] if selector.name else []
        for m in _matchers(selector):
            if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal:
                names.append(m.value)
            elif m.name == "__name__" and m.op == promql_parser.MatchOp.Re:
                pattern = _regex(m.value)
                hit = next((n for n in label_values("__name__") if INTERNAL_METRIC.match(n) and pattern.fullmatch(n)),
                           None)
                if hit:
                    raise denied(f"query: __name__=~{m.value!r} selects {hit}, a metric of the monitoring stack "
                                 "itself, not of the application", field="query")
            elif m.name in ENTITY_LABELS and m.op == promql_parser.MatchOp.Equal and _internal_value(m.name, m.value):
                raise denied(f"query: {m.name}={m.value!r} is the benchmark's own machinery, not the application",
                             field="query")
            elif m.name in ENTITY_LABELS and m.op == promql_parser.MatchOp.Re:
                pattern = _regex(m.value)
                hit = next((v for v in label_values(m.name) if _internal_value(m.name, v) and pattern.fullmatch(v)),
                           None)
                if hit:
                    raise denied(f"query: {m.name}=~{m.value!r} selects {hit!r}, the benchmark's own machinery",
                                 field="query")
        for name in names:
            if INTERNAL_METRIC.match(name):
                raise denied(f"query: {name} is a metric of the monitoring stack itself, not of the application",
                             field="query")


@dataclass
class Reach:
    """How far back in time a query reads: ``lookback`` seconds before its evaluation time (range selectors,
    subqueries and offsets, summed along each path), and the absolute ``@`` times it pins."""

    lookback: float
    pinned: list[float]


def _seconds(delta: Any) -> float:
    return float(delta.total_seconds()) if delta is not None else 0.0


def _pinned(node: Any) -> list[float]:
    at = getattr(node, "at", None)
    if at is not None and at.type == promql_parser.AtModifierType.At and at.at is not None:
        return [float(at.at.timestamp())]
    return []


def reach(query: str) -> Reach:
    """The time reach of a query that `check_query` accepted. Not counted: the 5-minute staleness look-back of an
    instant vector selector (with 2 s scrapes a live series always has a newer sample)."""

    def walk(node: Any) -> Reach:
        if isinstance(node, promql_parser.VectorSelector):
            return Reach(_seconds(node.offset), _pinned(node))
        if isinstance(node, promql_parser.MatrixSelector):
            inner = walk(node.vector_selector)
            return Reach(_seconds(node.range) + inner.lookback, inner.pinned)
        if isinstance(node, promql_parser.SubqueryExpr):
            inner = walk(node.expr)
            return Reach(_seconds(node.range) + _seconds(node.offset) + inner.lookback, inner.pinned + _pinned(node))
        children = [getattr(node, a) for a in ("expr", "param", "lhs", "rhs") if getattr(node, a, None) is not None]
        children += list(getattr(node, "args", None) or [])
        parts = [walk(c) for c in children if isinstance(c, promql_parser.Expr)]
        return Reach(max((r.lookback for r in parts), default=0.0), [t for r in parts for t in r.pinned])

    return walk(promql_parser.parse(query))


def visible_series(metric: Mapping[str, Any]) -> bool:
    """False for a result series whose labels show it belongs to the monitoring stack or the machinery."""
    if INTERNAL_METRIC.match(str(metric.get("__name__", ""))):
        return False
    return not any(_internal_value(label, str(metric[label])) for label in ENTITY_LABELS if label in metric)
