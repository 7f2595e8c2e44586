"""The price table that turns a model call's tokens into dollars: defaults shipped in ``prices.json``, overridden
(merged, model by model) by the file ``OPSBENCH_PRICES`` names.

Prices are USD per million tokens. A run whose model has no price is refused before anything deploys (a cost
column of zeros would look like a free model); a table with a malformed entry is refused naming the entry.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError

DEFAULTS = Path(__file__).with_name("prices.json")
FIELDS = ("input", "output", "cached_input", "cache_write")


class PriceError(OpsBenchError):
    """A price table that cannot be used: unreadable, malformed, or without the run's model."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens. ``cached_input``: prompt-cache reads; ``cache_write``: Anthropic's cache creation."""

    input: float
    output: float
    cached_input: float
    cache_write: float

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0) -> float:
        """Dollars for one call; ``input_tokens`` counts every prompt token, cached and cache-written ones included."""
        fresh = max(0, input_tokens - cached_tokens - cache_write_tokens)
        return (fresh * self.input + cached_tokens * self.cached_input + cache_write_tokens * self.cache_write
                + output_tokens * self.output) / 1_000_000


def _price(name: str, entry: Any, source: str) -> Price:
    if not isinstance(entry, dict):
        raise PriceError(f"{source}: model {name!r}: expected an object with input and output (USD per million "
                         f"tokens), got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise PriceError(f"{source}: model {name!r}: unknown field(s) {', '.join(unknown)} "
                         f"(allowed: {', '.join(FIELDS)})")
    values: dict[str, float] = {}
    for key in FIELDS:
        value = entry.get(key)
        if value is None and key in ("input", "output"):
            raise PriceError(f"{source}: model {name!r}: {key} is missing (USD per million tokens)")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PriceError(f"{source}: model {name!r}: {key} must be a number >= 0, got {value!r}")
        values[key] = float(value)
    return Price(values["input"], values["output"], values.get("cached_input", values["input"]),
                 values.get("cache_write", values["input"]))


def parse(doc: Any, source: str) -> dict[str, Price]:
    """The models of one table (keys starting with ``_`` are comments)."""
    if not isinstance(doc, dict):
        raise PriceError(f"{source}: a price table is a JSON object {{model: {{input, output, ...}}}}")
    return {str(name): _price(str(name), entry, source) for name, entry in doc.items() if not str(name).startswith("_")}


def load(environ: Mapping[str, str] = os.environ) -> tuple[dict[str, Price], str]:
    """(the table, where it came from): the defaults, with ``OPSBENCH_PRICES``'s models over them."""
    table = parse(json.loads(DEFAULTS.read_text()), str(DEFAULTS))
    override = environ.get("OPSBENCH_PRICES", "").strip()
    if not override:
        return table, str(DEFAULTS)
    path = Path(override)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise PriceError(f"OPSBENCH_PRICES={override}: cannot read it ({exc.strerror or exc})") from exc
    except (ValueError, RecursionError) as exc:
        raise PriceError(f"OPSBENCH_PRICES={override}: not JSON ({exc})") from exc
    return {**table, **parse(doc, override)}, f"{DEFAULTS} + {override}"


def lookup(table: Mapping[str, Price], model: str) -> Price | None:
    """The price of ``model``: its own entry, else the longest entry it starts with (``claude-sonnet-4-5-20250929``
    is priced as ``claude-sonnet-4-5``)."""
    if model in table:
        return table[model]
    prefixes = [name for name in table if model.startswith(name + "-") or model.startswith(name + "@")]
    return table[max(prefixes, key=len)] if prefixes else None


def require(table: Mapping[str, Price], source: str, model: str) -> Price:
    """The price of the run's model, or one error saying how to give it."""
    price = lookup(table, model)
    if price is None:
        raise PriceError(f"model {model!r} has no price in {source}: add it to a JSON file "
                         f'({{"{model}": {{"input": USD_PER_MTOK, "output": USD_PER_MTOK}}}}) and set '
                         "OPSBENCH_PRICES to its path")
    return price
