"""Task generation over the DevOps upstream projects, without building anything: the Python mutator on a tiny
sample package, the exact edits it makes, hiding a test function, the issue writer (never a test's name or the
mutated code), the build causes on sample build files, the seeded draw order, and the instance's scenario files."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.devops_projects import buildcfg, generate, issue_text, mutate, run, scenario_parts, tasks, testgen
from orchestrator.devops_projects import catalogue as cat
from orchestrator.errors import OpsBenchError
from orchestrator.spec import load_scenario
from orchestrator.validate import validate_scenario_file

SAMPLE = '''"""A tiny sample module."""

LIMIT = 10


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def window(items, size):
    out = []
    for i in range(len(items) - size + 1):
        out.append(items[i:i + size])
    return out


def label(count):
    total = count + 1
    return "many" if total >= 3 and not count == 0 else "few"


def pair(a, b):
    return divmod(a, b)
'''


def test_python_mutations_cover_every_kind_and_each_edit_is_exact_and_compiles() -> None:
    found = mutate.python_mutations(SAMPLE, "pkg/sample.py")
    assert {m.kind for m in found} == {"operator", "boundary", "branch", "arguments"}  # Python's kinds
    assert found == mutate.python_mutations(SAMPLE, "pkg/sample.py")  # a fixed order: the seed draws the same
    assert len({m.key for m in found}) == len(found)
    for m in found:
        assert m.function in {"clamp", "window", "label", "pair"}  # module-level code is never mutated
        edit = mutate.mutation_edit(SAMPLE, m)
        assert SAMPLE.count(edit["old"]) == 1
        mutant = mutate.apply_edit(SAMPLE, edit)
        assert mutant != SAMPLE
        assert mutate.python_compiles(mutant), m.describe()


def test_python_mutations_make_the_advertised_changes() -> None:
    described = {(m.kind, m.before.strip(), m.after.strip(), m.function)
                 for m in mutate.python_mutations(SAMPLE, "s.py")}
    assert ("operator", "<", "<=", "clamp") in described
    assert ("operator", "+", "-", "label") in described
    assert ("operator", "and", "or", "label") in described
    assert ("operator", "not", "", "label") in described
    assert ("boundary", "3", "4", "label") in described and ("boundary", "3", "2", "label") in described
    assert ("arguments", "a, b", "b, a", "pair") in described
    branch = [m for m in mutate.python_mutations(SAMPLE, "s.py") if m.kind == "branch" and m.line == 7]
    assert branch and mutate.apply_edit(SAMPLE, mutate.mutation_edit(SAMPLE, branch[0])).count("    pass\n") == 1


def test_an_edit_grows_until_its_text_is_unique() -> None:
    text = "def f(x):\n    return x + 1\n\ndef g(x):\n    return x + 1\n"
    start = text.rindex("+")
    edit = mutate.unique_edit(text, start, start + 1, "-", "m.py")
    assert text.count(edit["old"]) == 1 and "def g" in edit["old"]
    assert mutate.apply_edit(text, edit) == text[:start] + "-" + text[start + 1:]
    with pytest.raises(OpsBenchError, match="occurs 0 times"):
        mutate.apply_edit("nothing here", edit)


def test_hiding_a_test_function_keeps_the_rest_valid() -> None:
    tests = ("import pytest\n\n\nclass TestA:\n    @pytest.mark.slow\n    def test_one(self):\n        assert 1\n\n"
             "\nclass TestB:\n    def test_only(self):\n        assert 2\n\n\ndef test_free():\n    assert 3\n")
    after = tests
    for name in ("TestA.test_one", "TestB.test_only", "test_free"):
        after = mutate.apply_edit(after, mutate.python_remove_function(after, "tests/test_x.py", name))
    tree = ast.parse(after)  # still Python: an emptied class gets `pass`
    assert "test_one" not in after and "test_only" not in after and "test_free" not in after
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["TestA", "TestB"]
    with pytest.raises(OpsBenchError, match="no function"):
        mutate.python_remove_function(tests, "tests/test_x.py", "test_missing")


PYTEST_FAILURE = """AssertionError: assert 'persons' == 'people'
test_sample.py:41: in test_pluralize_person
    def test_pluralize_person(singular, plural):
>       assert plural == inflection.pluralize(singular)
E       AssertionError: assert 'people' == 'persons'
E        +  where 'persons' = <function pluralize at 0x7f3a2b1c>('person')
inflection/__init__.py:300: in pluralize
>       return word + suffix
"""

GO_FAILURE = """=== RUN   TestBytesRounding
    bytes_test.go:42: Bytes(82854982) = 82 MB, want 83 MB
    common_test.go:18: TestBytesRounding: got 82 MB
--- FAIL: TestBytesRounding (0.00s)
"""


def test_the_issue_is_written_from_observed_behaviour_without_test_names() -> None:
    title, body = issue_text.write_issue("python-inflection", "python", "inflection",
                                         [issue_text.Failure("test_pluralize_person", "test_sample.py",
                                                             PYTEST_FAILURE)])
    text = title + "\n" + body
    assert "pluralize('person')" in text and "'persons'" in text and "'people'" in text
    assert "0x7f3a2b1c" not in text and "<function" not in text
    assert "return word + suffix" not in text  # the library's own frames (the mutated line) are never quoted
    assert issue_text.leaks(text, ["test_pluralize_person", "test_sample.py", "word + suffix"]) == []
    assert title.startswith("`pluralize`")

    title, body = issue_text.write_issue("go-humanize", "go", "github.com/dustin/go-humanize",
                                         [issue_text.Failure("TestBytesRounding", ".", GO_FAILURE)])
    text = title + "\n" + body
    assert "Bytes(82854982) = 82 MB, want 83 MB" in text
    assert issue_text.leaks(text, ["TestBytesRounding", "bytes_test.go", "common_test.go"]) == []


def test_the_title_names_the_library_call_not_the_test_framework() -> None:
    detail = (">       self.assertTrue(idna.valid_contexto(a + b, 1))\nE       AssertionError: False is not true\n")
    title, _ = issue_text.write_issue("python-idna", "python", "idna", [issue_text.Failure("test_x", "t.py", detail)])
    assert title == "`valid_contexto` in idna gives a wrong result"


def test_leaks_finds_forbidden_and_test_like_names() -> None:
    assert issue_text.leaks("calls x < y in TestFoo via helper_test.go", ["x < y"]) == ["x < y", "TestFoo",
                                                                                       "helper_test.go"]
    assert issue_text.leaks("nothing to see", ["secret"]) == []


def test_build_causes_on_real_shaped_build_files(tmp_path: Path) -> None:
    py = tmp_path / "py"
    py.mkdir()
    (py / "pyproject.toml").write_text('[build-system]\nrequires = ["flit_core >=3.2,<4"]\n'
                                       'build-backend = "flit_core.buildapi"\n\n[project]\nname = "x"\n'
                                       'requires-python = ">=3.8"\n')
    catalogue = cat.load()
    project = catalogue.select(["python-idna"])[0]
    found = buildcfg.candidates(project, py)
    causes = {c.cause for c in found}
    assert causes == {"unresolvable-pin", "missing-dependency", "conflict-markers", "toolchain-target"}
    for cand in found:
        text = (py / "pyproject.toml").read_text()
        broken = mutate.apply_edit(text, cand.edits[0])
        assert broken != text
        assert mutate.apply_edit(broken, cand.reference[0]) == text  # the reference undoes it exactly
    conflict = next(c for c in found if c.cause == "conflict-markers")
    assert "<<<<<<< HEAD" in conflict.edits[0]["new"] and ">>>>>>>" in conflict.edits[0]["new"]

    go = tmp_path / "go"
    go.mkdir()
    (go / "go.mod").write_text("module example.com/m\n\ngo 1.16\n")
    gofound = buildcfg.candidates(catalogue.select(["go-semver"])[0], go)
    assert {c.cause for c in gofound} == {"unresolvable-pin", "toolchain-target", "conflict-markers",
                                          "build-variable"}
    work = next(c for c in gofound if c.cause == "build-variable")
    assert work.edits[0]["path"] == "go.work" and work.reference == [{"path": "go.work", "delete": True}]


def test_the_draw_order_depends_on_seed_project_and_family_only() -> None:
    items = list(range(40))
    a = tasks.draw_order(items, "s1", "go-semver", "issue")
    assert a == tasks.draw_order(items, "s1", "go-semver", "issue")
    assert a != tasks.draw_order(items, "s2", "go-semver", "issue")
    assert a != tasks.draw_order(items, "s1", "go-semver", "testgen")
    assert sorted(a) == items


def test_an_instance_is_written_as_a_scenario_in_the_hand_written_shape(tmp_path: Path) -> None:
    edit = {"path": "pkg/sample.py", "old": "    if value < low:\n", "new": "    if value <= low:\n"}
    inst = tasks.Instance("devops-gen-issue-python-idna-0123abcd", "issue", "python-idna", "python",
                             "`clamp` in idna gives a wrong result", "A user filed this issue:\n\n> text\n", [edit],
                             {"task": "resolve-issue", "kind": "fix", "project": "python-idna"},
                             [{"path": edit["path"], "old": edit["new"], "new": edit["old"]}],
                             provenance={"hidden_tests": ["tests/test_x.py::test_clamp"], "pristine_tests": 32},
                             proof={"untouched": {}})
    pristine = tmp_path / "pristine"
    (pristine / "pkg").mkdir(parents=True)
    (pristine / "pkg" / "sample.py").write_text(SAMPLE)
    folder = generate.write_instance(inst, tmp_path / "out", pristine)
    load_scenario(folder / "scenario.yaml")  # the scenario schema holds
    # and every rule of `opsbench validate`: a generated id needs no REGISTRY.yaml entry, and the upstream project
    # the workspace deploys (environment args) is in its topology
    assert validate_scenario_file(folder / "scenario.yaml") == []
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    truth = yaml.safe_load((folder / "ground_truth.yaml").read_text())
    assert scenario["metadata"]["generated"] is True
    # env_workspace deploys the upstream project alone, checked as its contract says, expecting the pristine count
    assert scenario["environment"]["args"]["projects"] == []
    [upstream] = scenario["environment"]["args"]["upstream"]
    assert upstream == {"id": "python-idna", **run.language_meta("python", 32)} and upstream["tests"] == 32
    assert upstream["check"] == "make -s -f opsbench.mk check" and "opsbench.mk" in upstream["protected"]
    assert scenario["metadata"]["class"] == "issue-resolving" and scenario["metadata"]["domain"] == "DevOps"
    assert scenario["faults"][0]["role"] == "fault_workspace_edit"
    assert scenario["faults"][0]["args"]["edits"] == [edit]
    assert scenario["reference"][0]["role"] == "solve_workspace_edit"
    assert truth["workspace"]["stages"] == [{"task": "resolve-issue", "kind": "fix", "project": "python-idna"}]
    assert truth["entities"][0]["faultType"] == "wrong_computation"
    assert set(scenario_parts.BUILD_FAULT_TYPES) == set(buildcfg.CAUSES)
    manifest = scenario["checks"]["manifestation"][0]["args"]["command"]
    digest = hashlib.sha256(mutate.apply_edit(SAMPLE, edit).encode()).hexdigest()
    assert manifest == f"echo '{digest}  pkg/sample.py' | sha256sum -c --status"
    visible = (folder / "scenario.yaml").read_text().split("tasks:", 1)[1].split("budget:", 1)[0]
    assert "test_clamp" not in visible and "<=" not in visible  # the goal names neither test nor mutation


def test_a_removal_keeps_enough_context_for_its_reverse_to_be_exact() -> None:
    text = "a\n<dep>\nx\n</dep>\nb\n<dep>\ny\n</dep>\nc\n"
    start = text.index("<dep>\ny")
    edit = mutate.unique_edit(text, start, start + len("<dep>\ny\n</dep>\n"), "", "pom.xml")
    broken = mutate.apply_edit(text, edit)
    assert broken == "a\n<dep>\nx\n</dep>\nb\nc\n"
    assert mutate.apply_edit(broken, {"path": "pom.xml", "old": edit["new"], "new": edit["old"]}) == text


def test_the_recorded_test_is_plain_pytest_and_the_helper_scripts_are_python() -> None:
    assert testgen.module_name("src/cachetools/func.py") == "cachetools.func"
    assert testgen.module_name("inflection/__init__.py") == "inflection"
    source = testgen.test_source("idna.core", "alabel", [{"args": ["'xn--a'"], "kwargs": {}, "result": "b'xn--a'"},
                                                        {"args": ["'b'", "1"], "kwargs": {"strict": "True"},
                                                         "result": "[1, 2]"}])
    tree = ast.parse(source)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["test_alabel_0", "test_alabel_1"]
    assert "assert alabel('b', 1, strict=True) == [1, 2]" in source
    for script in (testgen.CAPTURE_PLUGIN, testgen.EXPAND_SCRIPT):
        compile(script, "<helper>", "exec")


def test_a_generated_id_of_another_shape_is_refused_and_the_topology_gains_only_listed_projects() -> None:
    from orchestrator.role_topology import load_topology, with_upstream
    from orchestrator.validate import GENERATED_ID
    assert GENERATED_ID.fullmatch("devops-gen-testgen-python-idna-15178cca")
    assert not GENERATED_ID.fullmatch("devops-gen-oops-python-idna-15178cca")
    assert not GENERATED_ID.fullmatch("devops-build-junit-unresolvable")
    topo = with_upstream(load_topology("workspace", "local"), {"upstream": [{"id": "go-semver"}, {"id": {}}]})
    assert topo is not None
    ids = {e["id"] for e in topo["entities"]}
    assert {"go-semver", "go-semver-build", "ratelimit"} <= ids and "go-uuid" not in ids
    assert {"source": "workspace", "target": "go-semver", "type": "owns"} in topo["edges"]
    plain = load_topology("workspace")
    assert plain is not None and "go-semver" not in {e["id"] for e in plain["entities"]}


def test_testgen_draws_in_the_seeds_order_whatever_another_family_screened() -> None:
    muts = [mutate.Mutation("m.py", i, 0, "operator", "<", "<=", f"f{i}") for i in range(8)]
    order = testgen.testgen_order(muts, "s", "python-idna")
    assert order == tasks.draw_order(muts, "s", "python-idna", "testgen")
    assert {m.key for m in order} == {m.key for m in muts}
    assert testgen.testgen_order(muts, "s", "python-idna") == order


TESTS_OF_SAMPLE = "from pkg.sample import clamp\n\n\ndef test_clamp_low():\n    assert clamp(0, 1, 5) == 1\n\n\n" \
                  "def test_clamp_mid():\n    assert clamp(3, 1, 5) == 3\n"


class FakeHost:
    """A generator of one project whose screening and `make check` are simulated from the files: the one mutant,
    `value < low` -> `value > low`, fails test_clamp_mid only."""

    def __init__(self, root: Path) -> None:
        from types import SimpleNamespace

        from orchestrator.devops_projects.bench import Suite
        from orchestrator.devops_projects.issue_text import Failure
        self.pristine = root / "pristine"
        (self.pristine / "pkg").mkdir(parents=True)
        (self.pristine / "tests").mkdir()
        (self.pristine / "pkg" / "sample.py").write_text(SAMPLE)
        (self.pristine / "tests" / "test_sample.py").write_text(TESTS_OF_SAMPLE)
        self.project = cat.load().select(["python-idna"])[0]
        self.seed, self.tests, self.work = "s4", 2, root / "work"  # a seed whose split gives the mutant to testgen
        self.screened: dict[Any, Any] = {}
        self.kept: set[Any] = set()
        self.skip: frozenset[str] = frozenset()
        self.said: list[str] = []
        target = mutate.Mutation("pkg/sample.py", 7, 13, "operator", "<", ">", "clamp")
        fail = Failure("test_clamp_mid", "tests/test_sample.py", "assert 1 == 3\n where 1 = clamp(3, 1, 5)")

        def hide_edits(failed: dict[str, Any]) -> list[dict[str, str]]:
            return [mutate.python_remove_function(TESTS_OF_SAMPLE, "tests/test_sample.py", "test_clamp_mid")]

        self.bench = SimpleNamespace(root=self.pristine, mutations=lambda: [target], hide_edits=hide_edits)
        self.suite = Suite(failed={"tests/test_sample.py::test_clamp_mid": fail}, passed=1)

    def screen(self, m: mutate.Mutation, edit: dict[str, Any]) -> Any:
        return self.suite

    def check(self, root: Path) -> tuple[int, int, int, bool]:
        """Counts test functions; test_clamp_mid fails when the mutant is in."""
        tests = [line for p in (root / "tests").glob("test_*.py") for line in p.read_text().splitlines()
                 if line.startswith("def test_")]
        broken = "value > low" in (root / "pkg" / "sample.py").read_text()
        failed = sum(1 for t in tests if broken and "test_clamp_mid" in t)
        return (1 if failed else 0), len(tests) - failed, failed, True

    def verify_dir(self, name: str) -> Path:
        path = self.work / name
        if path.exists():
            import shutil
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def say(self, message: str) -> None:
        self.said.append(message)


def test_test_generation_from_a_hidden_test_of_the_project(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    report = tasks.Report("python-idna", "testgen", "s")
    testgen.from_hidden_tests(host, report, 1, 5)  # type: ignore[arg-type]
    [inst] = report.instances
    [mutant, hide] = inst.fault_edits
    assert mutant["path"] == "pkg/sample.py" and "value > low" in mutant["new"]
    assert hide["path"] == "tests/test_sample.py" and "test_clamp_mid" in hide["old"]
    # The reference gives the hidden test back, renamed (a file as released is no test the agent wrote); the
    # workspace expects its thinned suite (1 test)
    assert inst.reference_edits == [{"path": "tests/test_sample.py", "content": TESTS_OF_SAMPLE.replace(
        "def test_clamp_mid(", "def test_clamp_mid_reproduces(")}]
    assert inst.provenance["workspace_tests"] == 1 and inst.provenance["method"] == "hidden-test"
    assert inst.stage == {"task": "write-test", "kind": "write-tests", "project": "python-idna",
                          "bug": inst.fault_edits}
    assert inst.proof["buggy"]["failed"] == 1 and inst.proof["fixed"] == {"rc": 0, "passed": 2, "failed": 0}
    assert "test_clamp_mid" not in inst.goal and "value > low" not in inst.goal
    assert scenario_parts.environment_of(inst)["args"]["upstream"][0]["tests"] == 1
    # the same mutant is never drawn twice, whichever family kept it
    again = tasks.Report("python-idna", "testgen", "s")
    testgen.from_hidden_tests(host, again, 1, 5)  # type: ignore[arg-type]
    assert again.instances == [] and again.draws == []


def test_a_mutant_the_suite_misses_has_no_test_to_hide(tmp_path: Path) -> None:
    from orchestrator.devops_projects.bench import Suite
    host = FakeHost(tmp_path)
    host.suite = Suite(passed=2)
    report = tasks.Report("python-idna", "testgen", "s")
    testgen.from_hidden_tests(host, report, 1, 5)  # type: ignore[arg-type]
    assert report.instances == [] and report.draws[0].reason.startswith("no existing test fails")


def test_the_hidden_tests_come_back_renamed_or_not_at_all(tmp_path: Path) -> None:
    from orchestrator.devops_projects.issue_text import Failure
    (tmp_path / "a_test.go").write_text("package a\n\nfunc TestA(t *testing.T) {}\n\nfunc TestAB(t *testing.T) {}\n")
    [ref] = testgen.reference_tests(tmp_path, ["a_test.go"], [Failure("TestA/sub", ".", "x")]) or []
    assert ref["content"] == "package a\n\nfunc TestAReproduces(t *testing.T) {}\n\nfunc TestAB(t *testing.T) {}\n"
    (tmp_path / "test_b.py").write_text("def test_b():\n    pass\n\n\ndef test_b():\n    pass\n")
    assert testgen.reference_tests(tmp_path, ["test_b.py"], [Failure("test_b", "test_b.py", "x")]) is None


def test_a_reference_that_changes_no_test_file_is_not_proven(tmp_path: Path) -> None:
    (tmp_path / "pristine").mkdir()
    (tmp_path / "pristine" / "t_test.go").write_text("x")
    why, _ = tasks.verify_tests(tmp_path / "pristine", 1, [], [{"path": "t_test.go", "content": "x"}],
                                lambda _root: (0, 2, 0, True), tmp_path / "work")
    assert why.startswith("the reference adds or changes no test file")


def test_a_run_over_its_limit_is_tried_once_more_before_it_counts_as_hung(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.devops_projects.bench import Bench, Suite
    from orchestrator.devops_projects.fetch import Cache, StepFailed
    bench = Bench(cat.load().select(["python-idna"])[0], Cache(tmp_path), tmp_path / "bench")
    limits: list[float] = []

    def slow_once(limit: float, only: str = "") -> Suite:
        limits.append(limit)
        if len(limits) == 1:
            raise StepFailed("python-idna", "test", "over its time limit")
        return Suite(passed=3)

    monkeypatch.setattr(bench, "_run_python", slow_once)
    monkeypatch.setattr(bench, "host_busy", lambda: True)
    assert bench.run(timeout=10).passed == 3 and limits == [10, 40]

    def hangs(limit: float, only: str = "") -> Suite:
        limits.append(limit)
        raise StepFailed("python-idna", "test", "over its time limit")

    limits.clear()
    monkeypatch.setattr(bench, "_run_python", hangs)
    assert bench.run(timeout=10).broken == "the tests did not finish in 40 s" and limits == [10, 40]
    # On a quiet host the first limit is final: a hang costs one limit, not five.
    limits.clear()
    monkeypatch.setattr(bench, "host_busy", lambda: False)
    assert bench.run(timeout=10).broken == "the tests did not finish in 10 s" and limits == [10]

    def broken(limit: float, only: str = "") -> Suite:
        limits.append(limit)
        raise StepFailed("python-idna", "test", "pytest crashed")

    limits.clear()
    monkeypatch.setattr(bench, "_run_python", broken)
    assert bench.run(timeout=10).broken.endswith("pytest crashed") and limits == [10]  # no retry for a crash
