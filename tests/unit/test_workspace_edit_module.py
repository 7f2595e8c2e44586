"""roles/workspace_project's edit module without a workspace: applying and reverting edits on a plain folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

MODULE = Path(__file__).resolve().parents[2] / "roles" / "workspace_project" / "library" / "opsbench_workspace_edit.py"


@pytest.fixture(scope="module")
def edit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("opsbench_workspace_edit", MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = "package x\n\nfunc A() int {\n\treturn 1\n}\n\nfunc TestA(t *testing.T) {\n\tcheck(A())\n}\n\nfunc B() {}\n"


def test_a_hidden_function_replaced_by_a_blank_line_reverts_from_the_saved_file(edit: ModuleType,
                                                                                  tmp_path: Path) -> None:
    # Hiding a test function leaves "\n", which the file holds many times: only the saved original can undo it.
    (tmp_path / "a_test.go").write_text(SOURCE)
    edits = [{"path": "a_test.go", "old": "\treturn 1\n", "new": "\treturn 2\n"},
             {"path": "a_test.go", "old": "func TestA(t *testing.T) {\n\tcheck(A())\n}\n\n", "new": "\n"}]
    originals: dict[str, str | None] = {}
    uid = os.getuid()
    assert edit.apply_edits(tmp_path, edits, uid, originals) is True
    assert "TestA" not in (tmp_path / "a_test.go").read_text() and originals == {"a_test.go": SOURCE}
    assert edit.apply_edits(tmp_path, edits, uid, dict(originals)) is False  # twice equals once
    assert edit.revert_edits(tmp_path, edits, uid, originals) is True
    assert (tmp_path / "a_test.go").read_text() == SOURCE
    assert edit.revert_edits(tmp_path, edits, uid, originals) is False


def test_without_saved_originals_an_edit_reverts_by_its_text(edit: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a.go").write_text(SOURCE.replace("return 1", "return 2"))
    edit.revert_edits(tmp_path, [{"path": "a.go", "old": "return 1", "new": "return 2"}], os.getuid(), {})
    assert (tmp_path / "a.go").read_text() == SOURCE
    (tmp_path / "a.go").write_text(SOURCE.replace("func B() {}\n", "\n"))
    with pytest.raises(edit.EditError, match=r"edit 1 \(a.go\): the text to replace occurs \d+ times"):
        edit.revert_edits(tmp_path, [{"path": "a.go", "old": "func B() {}\n", "new": "\n"}], os.getuid(), {})
