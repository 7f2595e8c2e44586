"""Generated reference docs must match the schemas they are generated from."""

from orchestrator.docgen import GENERATED, render, write_docs
from orchestrator.spec import load_schema


def test_generated_docs_are_current() -> None:
    assert write_docs(check=True) == [], "run `make docs` and commit the result"


def test_every_schema_field_is_documented() -> None:
    text = render("scenario", "x")
    for name in load_schema("scenario")["properties"]:
        assert f"| `{name}` |" in text
    for nested in ("metadata.complexity.value", "faults[].role", "checks.baseline[].timeout",
                   "budget.wallClockSeconds", "evaluation.evaluators[].params"):
        assert f"| `{nested}` |" in text, nested
    assert set(GENERATED) == {"docs/scenario-spec.md", "docs/ground-truth.md"}
