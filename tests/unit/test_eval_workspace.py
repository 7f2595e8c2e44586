"""evaluate_workspace's logic without containers: which files a fix's scratch copy gets, which of the agent's files
count as its tests, how reports are counted, and how stages become a score (the container run is replaced by a
fake that reads the scratch copy). The live path is tests/e2e/test_devops_scenarios.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.evaluation import workspace as wsv
from orchestrator.trials import decided_pass

META = {"check": "make -s check", "report": "junit", "tests": 2, "protected": ["Makefile", "tests/**"]}


def make_project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


PRISTINE = {"Makefile": "check:\n\tpytest\n", "src/calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "def test_add(): ...\ndef test_zero(): ...\n", "pyproject.toml": "[project]\n"}


@pytest.mark.parametrize(("glob", "path", "hit"), [
    ("tests/**", "tests/test_a.py", True), ("tests/**", "tests/sub/x.py", True), ("tests/**", "src/tests.py", False),
    ("**/*_test.go", "cmd/x/main_test.go", True), ("**/*_test.go", "bucket_test.go", True),
    ("*_test.go", "cmd/main_test.go", False), ("Makefile", "Makefile", True), ("Makefile", "sub/Makefile", False),
    ("src/test/**", "src/test/java/A.java", True), ("src/test/**", "src/main/java/A.java", False),
])
def test_glob_regex(glob: str, path: str, hit: bool) -> None:
    assert wsv.matches(path, [glob]) is hit


def test_fix_copy_restores_protected_files_and_adds_hidden_tests(tmp_path: Path) -> None:
    pristine = make_project(tmp_path / "pristine", PRISTINE)
    agent = make_project(tmp_path / "agent", {
        **PRISTINE, "Makefile": "check:\n\ttrue\n",                       # the gate neutered
        # the tests skipped, as a cheating agent would skip them
        "tests/test_calc.py": "import pytest\npytestmark = pytest.mark.skip(reason='in the way')\n",
        "tests/test_mine.py": "def test_mine(): ...\n",                   # a test of its own: not the gate's
        "src/calc.py": "def add(a, b):\n    return b + a\n",             # the fix
        "target/stale.txt": "old build output", ".git/HEAD": "ref", "test-report.xml": "<forged/>"})
    dst = tmp_path / "scratch"
    wsv.prepare_fix(agent, pristine, META, [{"path": "tests/test_issue.py", "content": "def test_issue(): ...\n"}],
                    dst)
    assert (dst / "Makefile").read_text() == PRISTINE["Makefile"]
    assert (dst / "tests/test_calc.py").read_text() == PRISTINE["tests/test_calc.py"]
    assert not (dst / "tests/test_mine.py").exists()
    assert (dst / "tests/test_issue.py").is_file()
    assert (dst / "src/calc.py").read_text().endswith("return b + a\n")
    for never in ("target/stale.txt", ".git/HEAD", "test-report.xml"):
        assert not (dst / never).exists(), never


def test_agent_tests_are_new_or_changed_test_files_only(tmp_path: Path) -> None:
    pristine = make_project(tmp_path / "pristine", PRISTINE)
    agent = make_project(tmp_path / "agent", {**PRISTINE, "tests/test_new.py": "x", "src/helper.py": "y",
                                              "tests/test_calc.py": PRISTINE["tests/test_calc.py"] + "# more\n"})
    (agent / "tests" / "link.py").symlink_to("/etc/passwd")
    assert wsv.agent_tests(agent, pristine, META) == ["tests/test_calc.py", "tests/test_new.py"]


def test_counting_reports(tmp_path: Path) -> None:
    (tmp_path / "test-report.xml").write_text(
        '<testsuites><testsuite tests="5" failures="1" errors="1" skipped="1"/></testsuites>')
    assert wsv.count_report(tmp_path, "junit") == (2, 2, True)
    reports = tmp_path / "target" / "surefire-reports"
    reports.mkdir(parents=True)
    (reports / "TEST-A.xml").write_text('<testsuite tests="3" failures="0" errors="0" skipped="0"/>')
    (reports / "TEST-B.xml").write_text('<testsuite tests="2" failures="1" errors="0" skipped="0"/>')
    assert wsv.count_report(tmp_path, "surefire") == (4, 1, True)
    (tmp_path / "test-report.txt").write_text("=== RUN TestA\n--- PASS: TestA (0.00s)\n    --- PASS: TestA/sub "
                                              "(0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\n")
    assert wsv.count_report(tmp_path, "gotest") == (2, 1, True)
    assert wsv.count_report(tmp_path / "nothing", "gotest") == (0, 0, False)
    assert wsv.count_report(tmp_path / "nothing", "junit") == (0, 0, False)


def fake_check(passes: dict[str, Any]) -> Any:
    """A `make check` stand-in: reads the scratch copy's calc.py and tests, and reports like pytest would."""
    def check(scratch: Path, project: str, meta: dict[str, Any]) -> wsv.CheckRun:
        code = (scratch / "src/calc.py").read_text()
        tests = sorted(p.name for p in (scratch / "tests").glob("test_*.py"))
        failing = [t for t in tests if not passes[t](code)]
        rc = 1 if failing else 0
        return wsv.CheckRun(rc, len(tests) * 1 + 1 - len(failing), len(failing), False, 0.1, "", True)
    return check


def score(tmp_path: Path, agent_files: dict[str, str], stage: dict[str, Any], passes: dict[str, Any]
          ) -> dict[str, Any]:
    make_project(tmp_path / "src" / "calc", PRISTINE)
    tree = make_project(tmp_path / "tree" / "calc", agent_files).parent
    return wsv.score_workspace(None, {"workspace": {"stages": [stage]}}, {"workspace": {"tree": str(tree)}},
                               tmp_path / "work", source=tmp_path / "src", projects={"calc": META},
                               check=fake_check(passes))


BUG = [{"path": "src/calc.py", "old": "return a + b", "new": "return a - b"}]
CORRECT = {"test_calc.py": lambda code: True, "test_issue.py": lambda code: "a + b" in code or "b + a" in code,
           "test_mine.py": lambda code: "a + b" in code}


def test_fix_stage_passes_on_the_fixed_tree_only(tmp_path: Path) -> None:
    stage = {"task": "t", "kind": "fix", "project": "calc", "hidden_test_count": 1,
             "hidden_tests": [{"path": "tests/test_issue.py", "content": "x"}]}
    buggy = {**PRISTINE, "src/calc.py": "def add(a, b):\n    return a - b\n"}
    bad = score(tmp_path / "1", buggy, stage, CORRECT)
    assert bad["workspace_pass"] == 0 and bad["stages"][0]["reason"].startswith("make check failed")
    good = score(tmp_path / "2", PRISTINE, stage, CORRECT)
    assert good["workspace_pass"] == 1 and good["stages_passed"] == 1 and good["status"] == "scored"
    assert good["report"] == "no_submission"  # the report decides nothing


def test_fix_stage_refuses_a_run_with_too_few_tests(tmp_path: Path) -> None:
    stage = {"task": "t", "kind": "fix", "project": "calc", "hidden_test_count": 5}
    result = score(tmp_path, PRISTINE, stage, CORRECT)
    assert result["workspace_pass"] == 0 and "expected at least 7" in result["stages"][0]["reason"]


def test_write_tests_stage(tmp_path: Path) -> None:
    stage = {"task": "t", "kind": "write-tests", "project": "calc", "bug": BUG}
    buggy = {**PRISTINE, "src/calc.py": "def add(a, b):\n    return a - b\n"}
    none = score(tmp_path / "1", buggy, stage, CORRECT)
    assert none["workspace_pass"] == 0 and none["stages"][0]["reason"] == "no new or changed test file"
    catches = score(tmp_path / "2", {**buggy, "tests/test_mine.py": "x"}, stage, CORRECT)
    assert catches["workspace_pass"] == 1, catches["stages"][0]["reason"]
    # The record of the agent's work against the pristine project: the bug it was given and the test it added.
    assert catches["stages"][0]["changed_vs_pristine"] == ["src/calc.py", "tests/test_mine.py"]
    diff = (tmp_path / "2" / "work-t.diff").read_text()
    assert "-    return a + b\n+    return a - b" in diff and "+++ b/tests/test_mine.py" in diff
    assert catches["stages"][0]["agent_tests"] == ["tests/test_mine.py"]
    blind = score(tmp_path / "3", {**buggy, "tests/test_mine.py": "x"}, stage,
                  {**CORRECT, "test_mine.py": lambda code: True})
    assert blind["workspace_pass"] == 0 and "do not catch the bug" in blind["stages"][0]["reason"]
    wrong = score(tmp_path / "4", {**buggy, "tests/test_mine.py": "x"}, stage,
                  {**CORRECT, "test_mine.py": lambda code: "a - b" in code})
    assert wrong["workspace_pass"] == 0 and "do not pass on the fixed version" in wrong["stages"][0]["reason"]


def test_pipeline_scores_each_stage(tmp_path: Path) -> None:
    gt = {"workspace": {"stages": [{"task": "a", "kind": "fix", "project": "calc"},
                                   {"task": "b", "kind": "write-tests", "project": "calc", "bug": BUG}]}}
    make_project(tmp_path / "src" / "calc", PRISTINE)
    tree = make_project(tmp_path / "tree" / "calc", PRISTINE).parent
    result = wsv.score_workspace(None, gt, {"workspace": {"tree": str(tree)}}, tmp_path / "work",
                                 source=tmp_path / "src", projects={"calc": META}, check=fake_check(CORRECT))
    assert [s["passed"] for s in result["stages"]] == [True, False]
    assert result["workspace_pass"] == 0 and result["stage_pass_rate"] == 0.5


def test_a_bug_that_does_not_apply_is_a_scenario_defect(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="occurs 0 times"):
        wsv.apply_edits(make_project(tmp_path, PRISTINE), [{"path": "src/calc.py", "old": "nope", "new": "x"}])


def test_decided_pass_follows_the_deciders() -> None:
    assert decided_pass({"workspace": {"workspace_pass": 1}, "process": {}}) is True
    assert decided_pass({"workspace": {"workspace_pass": 0}}) is False
    assert decided_pass({"diagnosis": {"fl_pass": 1}}) is True
    assert decided_pass({"process": {"calls": 3}}) is None


def test_projects_file_names_every_project() -> None:
    projects = wsv.load_projects()
    assert set(projects) == {p.name for p in wsv.SOURCE_DIR.iterdir() if p.is_dir()}
    for name, meta in projects.items():
        assert (wsv.SOURCE_DIR / name / "Makefile").is_file(), name
        assert meta["report"] in ("surefire", "gotest", "junit") and meta["tests"] > 0
        assert any(wsv.matches(rel, wsv.protected_tests(meta)) for rel in wsv.files_of(wsv.SOURCE_DIR / name)), name


def test_a_devops_score_reads_as_one_line_per_stage() -> None:
    from orchestrator.run_views import render_summary
    scores = {"status": "scored", "workspace_pass": 0, "stages_passed": 1, "stages_total": 2, "report": "scored",
              "stages": [{"task": "fix-build", "kind": "fix", "project": "ratelimit", "passed": True,
                          "reason": "make check passed (11 tests)", "check": {"tail": "x" * 4000},
                          "changed_vs_pristine": ["go.mod"]},
                         {"task": "write-test", "kind": "write-tests", "project": "ratelimit", "passed": False,
                          "reason": "no new or changed test file", "changed_vs_pristine": []}]}
    text = render_summary({"run_id": "r", "scenario": "s", "status": "completed", "reason": "", "agent": {},
                           "evaluations": {"workspace": scores}, "cleanup": "done", "recovered": True,
                           "cleanup_problems": []})
    assert "  workspace: workspace_pass 0, stages 1/2, report scored" in text
    assert "    fix-build (fix, ratelimit): passed: make check passed (11 tests); changed vs pristine: go.mod" in text
    assert "    write-test (write-tests, ratelimit): failed: no new or changed test file" in text
    assert "xxxx" not in text  # the build log stays in --json and the evaluation file


def upstream_env(tmp_path: Path, tree: Path, **extra: Any) -> dict[str, Any]:
    """environment.json's workspace as env_workspace publishes it with one upstream project `calc`."""
    return {"workspace": {"tree": str(tree), "upstream": [{"id": "calc", **META}],
                          "upstream_src": str(tmp_path / "cache"), "deps": str(tmp_path / "deps"),
                          "deps_mount": "/opt/opsbench-deps", **extra}}


def test_an_upstream_project_is_scored_from_its_published_check_and_pristine_tree(tmp_path: Path) -> None:
    # The pristine tree is the cache's, not files/projects: a stage on it restores the protected files from there.
    make_project(tmp_path / "cache" / "calc", PRISTINE)
    tree = make_project(tmp_path / "tree" / "calc", {**PRISTINE, "src/calc.py": "def add(a, b):\n    return a - b\n"
                                                     }).parent
    seen: list[dict[str, Any]] = []

    def check(scratch: Path, project: str, meta: dict[str, Any]) -> wsv.CheckRun:
        seen.append(meta)
        return fake_check(CORRECT)(scratch, project, meta)

    stage = {"task": "t", "kind": "fix", "project": "calc", "hidden_test_count": 1,
             "hidden_tests": [{"path": "tests/test_issue.py", "content": "x"}]}
    result = wsv.score_workspace(None, {"workspace": {"stages": [stage]}}, upstream_env(tmp_path, tree),
                                 tmp_path / "work", projects={}, check=check)
    assert result["workspace_pass"] == 0 and seen == [{"id": "calc", **META}]
    assert result["stages"][0]["changed_vs_pristine"] == ["src/calc.py"]
    make_project(tree / "calc", PRISTINE)  # the agent's fix
    assert wsv.score_workspace(None, {"workspace": {"stages": [stage]}}, upstream_env(tmp_path, tree),
                               tmp_path / "work2", projects={}, check=check)["workspace_pass"] == 1


def test_a_stage_on_a_project_nobody_deployed_names_both_lists(tmp_path: Path) -> None:
    tree = make_project(tmp_path / "tree" / "other", PRISTINE).parent
    with pytest.raises(ValueError, match=r"project other is neither a written project \(ratelimit\) nor an upstream "
                                         r"one the environment deployed \(calc\)"):
        wsv.score_workspace(None, {"workspace": {"stages": [{"task": "t", "kind": "fix", "project": "other"}]}},
                            upstream_env(tmp_path, tree), tmp_path / "work", projects={"ratelimit": META},
                            check=fake_check(CORRECT))


def test_a_malformed_upstream_entry_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"workspace.upstream\[0\]: missing report, tests"):
        wsv.upstream_projects({"upstream": [{"id": "x", "check": "make check", "protected": []}], "upstream_src": "/c"})
    with pytest.raises(ValueError, match="with upstream_src set"):
        wsv.upstream_projects({"upstream": [{"id": "x"}]})


def test_run_check_mounts_the_offline_caches_read_only_for_an_upstream_project(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    calls: list[list[str]] = []
    monkeypatch.setattr(wsv.subprocess, "run", lambda argv, **_kw: subprocess.CompletedProcess(argv, 0, "", ""))

    def runner(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    wsv.run_check(tmp_path, "calc", META, runner=runner, deps=("/cache/deps", "/opt/opsbench-deps"))
    wsv.run_check(tmp_path, "calc", META, runner=runner)
    mount = "--mount=type=bind,source=/cache/deps,destination=/opt/opsbench-deps,ro"
    assert mount in calls[0] and calls[0].index(mount) < calls[0].index(wsv.IMAGE)
    assert not any("opsbench-deps" in a for a in calls[1])
