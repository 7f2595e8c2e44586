"""Critical user journeys as data: a small step DSL, its validation and human wording, and the shop's journeys.

A journey is a name, a description and an ordered list of steps. A step has a stable kebab-case ``name``, actions
(``do``, run in order) and then assertions (``expect``, checked in order). Every action and assertion is one JSON
object whose *verb* key holds its main argument, with options beside it::

    {"name": "add-to-cart",
     "do": [{"fill": "[data-testid=quantity]", "value": "2"}, {"click": "[data-testid=add-to-cart]"}],
     "expect": [{"text": "[data-testid=add-status]", "matches": "^Added"},
                {"number": "[data-testid=cart-count]", "min": 2}]}

Selectors are CSS; an action or a single-element assertion uses the *first* element that matches. Every action and
assertion takes ``timeout`` (seconds; default: the run's action timeout).

Actions:
- ``goto: path`` (relative to the base URL) [``wait_until``: load|domcontentloaded|networkidle]
- ``click: selector`` [``navigates``: true waits for the page the click loads]
- ``fill: selector, value``; ``select: selector, value`` [``navigates``] (an ``<option>`` by value or label)
- ``wait_for: selector`` [``state``: visible|attached|hidden|detached]
- ``remember: name, js``: evaluates the JS expression (retried until it gives a value) and keeps it as
  ``vars.<name>`` for later JS expressions (e.g. a price seen on one page, compared on another).

Assertions (retried until they hold or the timeout expires, so they wait for asynchronous rendering):
- ``visible: selector``; ``text: selector, matches`` (a Python regex searched in the element's text)
  [``all``: every match must match]; ``value: selector, matches`` (a form control's value);
  ``count_at_least: selector, n``; ``attribute: selector, name, matches`` [``all``]; ``url: regex`` (path and query)
- ``number: selector`` [``attribute`` (else the text)] with any of ``min``/``max`` (inclusive), ``above``
  (exclusive), ``equals`` (a number or a JS expression) and ``tolerance`` (default 0.01)
- ``js: expression, says`` (a human sentence) [``actual``: a JS expression shown when it fails]. In every JS
  expression: ``vars``, ``$(sel)`` (first element or null), ``$$(sel)`` (array), ``text(selOrEl)`` and
  ``num(selOrEl, attribute?)`` (the first number in it, NaN when none).
- ``no_console_errors: step|journey`` and ``no_failed_requests: step|journey`` [``matching``: a regex on the
  request's URL (path and query for the site's own)]: page health, checked only where a journey asks for it
  (console errors and failed requests are always captured as evidence).
Any assertion takes ``says`` (how the report phrases it) and ``stop_if: selector``: fail at once, quoting that
element's text, when it is visible (an error message the page shows instead of the awaited result).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import CujError

Item = dict[str, Any]
"""One action or assertion, as data."""

NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SCOPES = ("step", "journey")
WAIT_UNTIL = ("load", "domcontentloaded", "networkidle", "commit")
STATES = ("visible", "attached", "hidden", "detached")

ACTIONS: dict[str, frozenset[str]] = {
    "goto": frozenset({"wait_until"}),
    "click": frozenset({"navigates"}),
    "fill": frozenset({"value"}),
    "select": frozenset({"value", "navigates"}),
    "wait_for": frozenset({"state"}),
    "remember": frozenset({"js"}),
}
"""Action verb -> its allowed options (besides ``timeout``)."""

CHECKS: dict[str, frozenset[str]] = {
    "visible": frozenset(),
    "text": frozenset({"matches", "all"}),
    "value": frozenset({"matches"}),
    "count_at_least": frozenset({"n"}),
    "attribute": frozenset({"name", "matches", "all"}),
    "number": frozenset({"attribute", "min", "max", "above", "equals", "tolerance"}),
    "url": frozenset(),
    "js": frozenset({"actual"}),
    "no_console_errors": frozenset(),
    "no_failed_requests": frozenset({"matching"}),
}
"""Assertion kind -> its allowed options (besides ``timeout``, ``says`` and ``stop_if``)."""

REQUIRED: dict[str, frozenset[str]] = {
    "fill": frozenset({"value"}), "select": frozenset({"value"}), "remember": frozenset({"js"}),
    "text": frozenset({"matches"}), "value": frozenset({"matches"}), "count_at_least": frozenset({"n"}),
    "attribute": frozenset({"name", "matches"}), "js": frozenset({"says"}),
}
COMMON_ACTION = frozenset({"timeout"})
COMMON_CHECK = frozenset({"timeout", "says", "stop_if"})
HEALTH = ("no_console_errors", "no_failed_requests")
DEFAULT_TOLERANCE = 0.01


@dataclass(frozen=True)
class Step:
    name: str
    do: tuple[Item, ...] = ()
    expect: tuple[Item, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "do": [dict(a) for a in self.do], "expect": [dict(c) for c in self.expect]}


@dataclass(frozen=True)
class Journey:
    name: str
    description: str
    steps: tuple[Step, ...] = field(default_factory=tuple)

    def step_names(self) -> list[str]:
        return [s.name for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Journey:
        """A journey from its data form, validated (CujError naming the journey, step and item otherwise)."""
        if not isinstance(data, Mapping):
            raise CujError(f"a journey must be an object with name, description and steps, not {data!r}")
        name = data.get("name")
        where = f"journey {name!r}"
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise CujError(f"{where}: the name must be kebab-case (lower-case letters, digits, dashes)")
        unknown = set(data) - {"name", "description", "steps"}
        if unknown:
            raise CujError(f"{where}: unknown field(s) {sorted(unknown)} (known: name, description, steps)")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise CujError(f"{where}: description must be a string")
        raw_steps = data.get("steps")
        if not isinstance(raw_steps, Sequence) or isinstance(raw_steps, str) or not raw_steps:
            raise CujError(f"{where}: steps must be a non-empty list")
        steps: list[Step] = []
        for i, raw in enumerate(raw_steps, 1):
            steps.append(_step_from(raw, f"{where} step {i}"))
        names = [s.name for s in steps]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise CujError(f"{where}: step names must be unique, repeated: {dupes}")
        return cls(name, description, tuple(steps))


def _step_from(raw: Any, where: str) -> Step:
    if not isinstance(raw, Mapping):
        raise CujError(f"{where}: a step must be an object with name, do, expect")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise CujError(f"{where}: the step name {name!r} must be kebab-case (lower-case letters, digits, dashes)")
    where = f"{where} ({name})"
    unknown = set(raw) - {"name", "do", "expect"}
    if unknown:
        raise CujError(f"{where}: unknown field(s) {sorted(unknown)} (known: name, do, expect)")
    do = [_validate(a, ACTIONS, COMMON_ACTION, f"{where} do[{i}]") for i, a in enumerate(_items(raw, "do", where))]
    expect = [_validate(c, CHECKS, COMMON_CHECK, f"{where} expect[{i}]")
              for i, c in enumerate(_items(raw, "expect", where))]
    if not do and not expect:
        raise CujError(f"{where}: a step needs at least one action or assertion")
    return Step(name, tuple(do), tuple(expect))


def _items(raw: Mapping[str, Any], key: str, where: str) -> list[Any]:
    items = raw.get(key, [])
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise CujError(f"{where}: {key} must be a list")
    return list(items)


def verb_of(item: Mapping[str, Any]) -> str:
    """The verb (action) or kind (assertion) of an item ("" when it has none or several)."""
    return _verb(item, ACTIONS) or _verb(item, CHECKS)


def _verb(item: Mapping[str, Any], verbs: Mapping[str, frozenset[str]]) -> str:
    """The key of ``item`` that names one of ``verbs``; a verb's own option may share a name with another verb
    (``number``'s ``attribute``, ``fill``'s ``value``): the verb is the candidate whose options hold the others."""
    found = [k for k in item if k in verbs]
    if len(found) == 1:
        return found[0]
    owners = [k for k in found if set(found) - {k} <= verbs[k]]
    return owners[0] if len(owners) == 1 else ""


def _validate(item: Any, verbs: Mapping[str, frozenset[str]], common: frozenset[str], where: str) -> Item:
    kind = "action" if verbs is ACTIONS else "assertion"
    if not isinstance(item, Mapping):
        raise CujError(f"{where}: an {kind} must be an object, not {item!r}")
    verb = _verb(item, verbs)
    if not verb:
        raise CujError(f"{where}: an {kind} needs exactly one of {sorted(verbs)}, got keys {sorted(item)}")
    allowed = verbs[verb] | common | {verb}
    unknown = set(item) - allowed
    if unknown:
        raise CujError(f"{where}: {verb}: unknown option(s) {sorted(unknown)} (allowed: {sorted(allowed - {verb})})")
    missing = REQUIRED.get(verb, frozenset()) - set(item)
    if missing:
        raise CujError(f"{where}: {verb}: missing {sorted(missing)}")
    main = item[verb]
    if verb in HEALTH:
        if main not in SCOPES:
            raise CujError(f"{where}: {verb} takes a scope, one of {list(SCOPES)}, not {main!r}")
    elif not isinstance(main, str) or not main.strip():
        raise CujError(f"{where}: {verb} needs a non-empty string (a selector, path, regex or name), not {main!r}")
    for key in ("matches", "matching") + (("url",) if verb == "url" else ()):
        if key in item:
            try:
                re.compile(item[key])
            except (re.error, TypeError) as exc:
                raise CujError(f"{where}: {verb}: {key} {item[key]!r} is not a valid regex: {exc}") from None
    if "timeout" in item and not _positive(item["timeout"]):
        raise CujError(f"{where}: timeout must be a positive number of seconds, not {item['timeout']!r}")
    if verb == "count_at_least" and (not isinstance(item["n"], int) or isinstance(item["n"], bool) or item["n"] < 0):
        raise CujError(f"{where}: count_at_least: n must be a non-negative integer")
    if verb == "wait_for" and item.get("state", "visible") not in STATES:
        raise CujError(f"{where}: wait_for: state must be one of {list(STATES)}")
    if verb == "goto" and item.get("wait_until", "load") not in WAIT_UNTIL:
        raise CujError(f"{where}: goto: wait_until must be one of {list(WAIT_UNTIL)}")
    if verb in ("fill", "select") and not isinstance(item["value"], str):
        raise CujError(f"{where}: {verb}: value must be a string")
    if verb == "remember" and not item[verb].isidentifier():
        raise CujError(f"{where}: remember: {item[verb]!r} must be a JS identifier")
    if verb == "number":
        for key in ("min", "max", "above", "tolerance"):
            if key in item and not _number(item[key]):
                raise CujError(f"{where}: number: {key} must be a number")
        if "equals" in item and not (_number(item["equals"]) or isinstance(item["equals"], str)):
            raise CujError(f"{where}: number: equals must be a number or a JS expression")
        if not {"min", "max", "above", "equals"} & set(item):
            raise CujError(f"{where}: number: give at least one of min, max, above, equals")
    for key in ("all", "navigates"):
        if key in item and not isinstance(item[key], bool):
            raise CujError(f"{where}: {verb}: {key} must be true or false")
    for key in ("says", "actual", "stop_if", "attribute", "name", "js"):
        if key in item and not isinstance(item[key], str):
            raise CujError(f"{where}: {verb}: {key} must be a string")
    return dict(item)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _number(value) and value > 0


def journeys_from(data: Iterable[Journey | Mapping[str, Any]]) -> list[Journey]:
    """Journeys given as objects or data, validated; names must be unique."""
    out = [j if isinstance(j, Journey) else Journey.from_dict(j) for j in data]
    names = [j.name for j in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CujError(f"journey names must be unique in a run, repeated: {dupes}")
    if not out:
        raise CujError("no journey to run")
    return out


# -- how the report words an item --------------------------------------------------------------------------------

def _re(pattern: str) -> str:
    return f"/{pattern}/"


def describe_action(action: Mapping[str, Any]) -> str:
    """An action as the report names it, e.g. ``click [data-testid=add-to-cart]``."""
    verb = verb_of(action)
    main = action.get(verb)
    if verb == "goto":
        return f"open {main}"
    if verb in ("fill", "select"):
        return f"{verb} {main} with {action.get('value')!r}"
    if verb == "wait_for":
        return f"wait for {main} to be {action.get('state', 'visible')}"
    if verb == "remember":
        return f"remember {main} = {action.get('js')}"
    return f"{verb} {main}"


def describe_check(check: Mapping[str, Any]) -> str:
    """An assertion as a sentence (its ``says`` when it has one)."""
    if check.get("says"):
        return str(check["says"])
    kind = verb_of(check)
    sel = check.get(kind)
    every = "every " if check.get("all") else ""
    if kind == "visible":
        return f"{sel} is visible"
    if kind == "text":
        return f"the text of {every}{sel} matches {_re(check['matches'])}"
    if kind == "value":
        return f"the value of {sel} matches {_re(check['matches'])}"
    if kind == "count_at_least":
        return f"at least {check['n']} element(s) match {sel}"
    if kind == "attribute":
        return f"attribute {check['name']} of {every}{sel} matches {_re(check['matches'])}"
    if kind == "number":
        return f"the number in {_source(check)} of {sel} is {_conditions(check)}"
    if kind == "url":
        return f"the page URL matches {_re(str(sel))}"
    if kind == "no_console_errors":
        return f"no console errors during this {sel}"
    if kind == "no_failed_requests":
        what = f"requests matching {_re(check['matching'])}" if check.get("matching") else "requests"
        return f"no failed {what} during this {sel}"
    return str(sel)


def _source(check: Mapping[str, Any]) -> str:
    return str(check["attribute"]) if check.get("attribute") else "the text"


def _conditions(check: Mapping[str, Any], equals_value: float | None = None) -> str:
    parts = []
    if "equals" in check:
        target = check["equals"]
        shown = f"{equals_value:g} ({target})" if isinstance(target, str) and equals_value is not None else str(target)
        parts.append(f"= {shown} (within {check.get('tolerance', DEFAULT_TOLERANCE):g})")
    if "above" in check:
        parts.append(f"> {check['above']:g}")
    if "min" in check:
        parts.append(f">= {check['min']:g}")
    if "max" in check:
        parts.append(f"<= {check['max']:g}")
    return " and ".join(parts)


def expected_of(check: Mapping[str, Any], equals_value: float | None = None) -> str:
    """What the assertion expects, in words (``equals_value``: a JS ``equals`` as evaluated)."""
    kind = verb_of(check)
    if kind == "visible":
        return "a visible element"
    if kind in ("text", "value"):
        scope = "every element's text" if check.get("all") else kind
        return f"{scope} matching {_re(check['matches'])}"
    if kind == "attribute":
        return f"{check['name']} matching {_re(check['matches'])}"
    if kind == "count_at_least":
        return f"at least {check['n']}"
    if kind == "number":
        return f"a number {_conditions(check, equals_value)}"
    if kind == "url":
        return f"a URL matching {_re(str(check['url']))}"
    if kind == "js":
        return "true"
    if kind == "no_console_errors":
        return "0 console errors"
    if kind == "no_failed_requests":
        return "0 failed requests"
    return ""


# -- the DSL as Python helpers (each returns the data form) -------------------------------------------------------

def _opts(**options: Any) -> dict[str, Any]:
    return {k: v for k, v in options.items() if v is not None}


def goto(path: str, *, wait_until: str | None = None, timeout: float | None = None) -> Item:
    return {"goto": path, **_opts(wait_until=wait_until, timeout=timeout)}


def click(selector: str, *, navigates: bool | None = None, timeout: float | None = None) -> Item:
    return {"click": selector, **_opts(navigates=navigates, timeout=timeout)}


def fill(selector: str, value: str, *, timeout: float | None = None) -> Item:
    return {"fill": selector, "value": value, **_opts(timeout=timeout)}


def select(selector: str, value: str, *, navigates: bool | None = None, timeout: float | None = None) -> Item:
    return {"select": selector, "value": value, **_opts(navigates=navigates, timeout=timeout)}


def wait_for(selector: str, state: str | None = None, *, timeout: float | None = None) -> Item:
    return {"wait_for": selector, **_opts(state=state, timeout=timeout)}


def remember(name: str, js_expression: str, *, timeout: float | None = None) -> Item:
    return {"remember": name, "js": js_expression, **_opts(timeout=timeout)}


def visible(selector: str, **common: Any) -> Item:
    return {"visible": selector, **_opts(**common)}


def text(selector: str, matches: str, *, all: bool | None = None, **common: Any) -> Item:
    return {"text": selector, "matches": matches, **_opts(all=all, **common)}


def value(selector: str, matches: str, **common: Any) -> Item:
    return {"value": selector, "matches": matches, **_opts(**common)}


def count_at_least(selector: str, n: int, **common: Any) -> Item:
    return {"count_at_least": selector, "n": n, **_opts(**common)}


def attribute(selector: str, name: str, matches: str, *, all: bool | None = None, **common: Any) -> Item:
    return {"attribute": selector, "name": name, "matches": matches, **_opts(all=all, **common)}


def number(selector: str, *, attribute: str | None = None, min: float | None = None,
           max: float | None = None, above: float | None = None, equals: float | str | None = None,
           tolerance: float | None = None, **common: Any) -> Item:
    return {"number": selector, **_opts(attribute=attribute, min=min, max=max, above=above, equals=equals,
                                        tolerance=tolerance, **common)}


def url(pattern: str, **common: Any) -> Item:
    return {"url": pattern, **_opts(**common)}


def js(expression: str, says: str, *, actual: str | None = None, **common: Any) -> Item:
    return {"js": expression, "says": says, **_opts(actual=actual, **common)}


def no_console_errors(scope: str = "journey", **common: Any) -> Item:
    return {"no_console_errors": scope, **_opts(**common)}


def no_failed_requests(scope: str = "journey", *, matching: str | None = None, **common: Any) -> Item:
    return {"no_failed_requests": scope, **_opts(matching=matching, **common)}


def step(name: str, do: Sequence[Item] = (), expect: Sequence[Item] = ()) -> Step:
    return _step_from({"name": name, "do": list(do), "expect": list(expect)}, f"step {name!r}")


def journey(name: str, description: str, steps: Sequence[Step]) -> Journey:
    return Journey.from_dict({"name": name, "description": description, "steps": [s.to_dict() for s in steps]})


# -- the shop's journeys (docs: /work/notes/cuj-contract.md, the shop pages' DOM contract) ------------------------

def tid(test_id: str) -> str:
    """The CSS selector of a ``data-testid``."""
    return f'[data-testid="{test_id}"]'


PRICE = r"\d+(?:\.\d+)?\s*[A-Z]{3}"
"""A price as the pages print it: ``12.34 EUR``."""
CHECKOUT_PRODUCT = "OLJCESPC7Z"
RECOMMENDING_PRODUCT = "66VCHSJNUP"
_ROW = f'{tid("cart-item")}[data-product-id="{CHECKOUT_PRODUCT}"]'

BROWSE = journey("browse", "The home page lists products with prices; a product page shows its name and price.", [
    step("open-home", do=[goto("/")], expect=[
        count_at_least(tid("product-card"), 1),
        text(f"{tid('product-card')} {tid('product-price')}", PRICE, says="the first product card shows a price"),
    ]),
    step("open-product", do=[click(f"{tid('product-card')} {tid('product-link')}", navigates=True)], expect=[
        url(r"^/product/[A-Za-z0-9]+"),
        visible(tid("product-name")),
        text(tid("product-name"), r"\S", says="the product name is not empty"),
        visible(tid("product-price")),
        text(tid("product-price"), PRICE),
    ]),
])

CHECKOUT = journey(
    "checkout",
    f"Put 2 x {CHECKOUT_PRODUCT} in the cart, check the cart's lines and total, and place the order. The last step "
    "also requires that no cart or checkout API request failed during the journey and that the checkout page logged "
    "no console error: an order that only went through after errors is not a clean purchase.",
    [
        step("open-product", do=[
            goto(f"/product/{CHECKOUT_PRODUCT}"),
            remember("unit_price", f"num($('{tid('product-price')}'), 'data-amount')"),
        ], expect=[
            visible(tid("product-name")),
            number(tid("product-price"), attribute="data-amount", above=0),
        ]),
        step("add-to-cart", do=[fill(tid("quantity"), "2"), click(tid("add-to-cart"))], expect=[
            text(tid("add-status"), r"^Added", stop_if=tid("add-error")),
            number(tid("cart-count"), min=2),
        ]),
        step("open-cart", do=[click(tid("cart-link"), navigates=True)], expect=[
            count_at_least(_ROW, 1, stop_if=tid("cart-error"),
                           says=f"the cart lists a row for {CHECKOUT_PRODUCT}"),
            text(f"{_ROW} {tid('item-quantity')}", r"^2$", says=f"the {CHECKOUT_PRODUCT} row has quantity 2"),
            number(f"{_ROW} {tid('item-price')}", attribute="data-amount", equals="vars.unit_price * 2",
                   says="the line amount is 2 x the unit price seen on the product page (within 0.01)"),
            js(f"Math.abs(num($('{tid('cart-total')}'), 'data-amount') - $$('{tid('item-price')}')"
               ".reduce((s, e) => s + num(e, 'data-amount'), 0)) < 0.01",
               says="the cart total equals the sum of the line amounts (within 0.01)",
               actual=f"'total ' + num($('{tid('cart-total')}'), 'data-amount') + ', sum of lines ' + "
                      f"$$('{tid('item-price')}').reduce((s, e) => s + num(e, 'data-amount'), 0)"),
        ]),
        step("open-checkout", do=[click(tid("checkout-link"), navigates=True)], expect=[
            url(r"^/checkout"),
            visible(tid("checkout-form")),
        ]),
        step("place-order", do=[click(tid("place-order"))], expect=[
            visible(tid("order-confirmation"), stop_if=tid("checkout-error")),
            text(tid("order-id"), r"\S", says="the confirmation shows an order id"),
            number(tid("order-total"), attribute="data-amount", above=0),
            no_failed_requests("journey", matching=r"^/api/(cart|checkout)\b"),
            no_console_errors("step"),
        ]),
    ])

CURRENCY = journey("currency", "Switching to EUR reprices the home page and product pages in EUR.", [
    step("open-home", do=[goto("/")], expect=[count_at_least(tid("product-price"), 1)]),
    step("select-eur", do=[select(tid("currency-select"), "EUR", navigates=True)], expect=[
        count_at_least(tid("product-price"), 1),
        text(tid("product-price"), r"\bEUR\b", all=True),
        value(tid("currency-select"), r"^EUR$"),
    ]),
    step("open-product", do=[click(f"{tid('product-card')} {tid('product-link')}", navigates=True)], expect=[
        text(tid("product-price"), r"\bEUR\b"),
        attribute(tid("product-price"), "data-currency", r"^EUR$"),
    ]),
])

RECOMMENDATIONS = journey(
    "recommendations", f"The page of {RECOMMENDING_PRODUCT} recommends products, and a recommendation opens.", [
        step("open-product", do=[goto(f"/product/{RECOMMENDING_PRODUCT}")], expect=[
            visible(tid("product-name")),
            count_at_least(f"{tid('recommendations')} {tid('recommendation')}", 1),
        ]),
        step("open-recommendation", do=[
            remember("recommended", f"new URL($('{tid('recommendation')} a').href).pathname"),
            click(f"{tid('recommendation')} a", navigates=True),
        ], expect=[
            js("location.pathname === vars.recommended", says="the clicked recommendation's page loaded",
               actual="location.pathname + ' (clicked ' + vars.recommended + ')'"),
            text(tid("product-name"), r"\S", says="the product name is not empty"),
        ]),
    ])

SHOP_JOURNEYS: dict[str, Journey] = {j.name: j for j in (BROWSE, CHECKOUT, CURRENCY, RECOMMENDATIONS)}

SHOP_STEP_NEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    "browse": {
        "open-home": ("catalog", "currency"),          # GET /: the product list, the currency selector
        "open-product": ("catalog",),                  # GET /product/{id} in USD (no conversion)
    },
    "checkout": {
        "open-product": ("catalog",),
        "add-to-cart": ("catalog", "cart"),            # POST /api/cart: the product must exist, then the cart
        "open-cart": ("cart", "catalog", "currency"),  # GET /cart, then cart.js: /api/cart and /api/products
        "open-checkout": ("currency",),                # GET /checkout: the currency selector
        "place-order": ("checkout",),                  # POST /api/checkout (checkout calls the rest)
    },
    "currency": {
        "open-home": ("catalog", "currency"),
        "select-eur": ("catalog", "currency"),         # every price converted to EUR
        "open-product": ("catalog", "currency"),
    },
    "recommendations": {
        "open-product": ("catalog", "recommendation"),  # the page renders without them; this step counts them
        "open-recommendation": ("catalog",),
    },
}
"""The services of the shop's topology each journey step needs: the frontend's callees whose failure the step shows
(the pages' own requests and what the frontend calls to answer them; ads are rendered by the same pages but no step
checks them). The one place that says which backend a browser step reaches: generated incidents derive from it which
steps a fault breaks (orchestrator/generation/journeys.py). Every step of SHOP_JOURNEYS has an entry (tested)."""


def select_journeys(names: Sequence[str] | None, known: Mapping[str, Journey] | None = None) -> list[Journey]:
    """The named journeys of ``known`` (default: the shop's), all of them for none; CujError for unknown names."""
    known = SHOP_JOURNEYS if known is None else known
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CujError(f"unknown journey(s) {unknown}; known journeys: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]
