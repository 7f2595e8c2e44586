"""Finding a scenario reads its spec once and schema-checks it once (it used to do both twice per command)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator import catalog, paths, spec, validate
from orchestrator.harness import record
from orchestrator.yamlfile import read_yaml


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Counter[str]]:
    """Reads and scenario schema checks per spec file, wherever they happen."""
    reads: Counter[str] = Counter()
    checks: Counter[str] = Counter()
    real_check = validate.schema_problems

    def read(path: Path) -> Any:
        if Path(path).name == "scenario.yaml":
            reads[Path(path).parent.name] += 1
        return read_yaml(path)

    def check(path: Path, data: Any, schema: str) -> Any:
        if schema == "scenario":
            checks[Path(path).parent.name] += 1
        return real_check(path, data, schema)

    for module in (spec, validate):
        monkeypatch.setattr(module, "read_yaml", read)
        monkeypatch.setattr(module, "schema_problems", check)
    return reads, checks


def test_find_scenario_reads_and_checks_its_spec_once(counted: tuple[Counter[str], Counter[str]]) -> None:
    reads, checks = counted
    scn = catalog.find_scenario("loopweb-web-down")
    assert scn.id == "loopweb-web-down"
    assert reads["loopweb-web-down"] == 1 and checks["loopweb-web-down"] == 1


def test_listing_a_domain_reads_each_spec_once(counted: tuple[Counter[str], Counter[str]]) -> None:
    reads, checks = counted
    chosen = catalog.domain_scenarios("DevOps")
    assert chosen and all(s.data["metadata"]["domain"] == "DevOps" for s in chosen)
    every = {f.parent.name for f in spec.spec_files()}
    assert set(reads) == every and max(reads.values()) == 1 and max(checks.values()) == 1


def test_replayable_scenarios_read_each_spec_once(counted: tuple[Counter[str], Counter[str]]) -> None:
    reads, _ = counted
    assert record.replayable_scenarios()
    assert max(reads.values()) == 1


def test_an_invalid_spec_is_still_refused_with_its_problems(tmp_path: Path) -> None:
    src = paths.SPECS_DIR / "loopweb-web-down"
    (tmp_path / "s").mkdir()
    for f in src.iterdir():
        (tmp_path / "s" / f.name).write_bytes(f.read_bytes())
    text = (tmp_path / "s" / "scenario.yaml").read_text()
    (tmp_path / "s" / "scenario.yaml").write_text(text.replace("role: fault_", "role: fault_nonexistent_", 1))
    with pytest.raises(validate.SpecInvalid) as err:
        catalog.find_scenario(str(tmp_path / "s"))
    assert "fault_nonexistent_" in str(err.value.problems)
