"""Java mutation screening on small fixtures: the JavaParser mutator (every kind, exact edits, every mutant of the
fixture compiles with javac, the same list on every run), hiding JUnit test methods, reading Surefire reports into
failing tests with the statement that failed, the Java issue text, Java test renames; and test generation drawn on
its own equals test generation drawn after the issue family (same seed, same instances)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects import issue_text, mutate, tasks, testgen
from orchestrator.devops_projects.bench import Bench, Suite
from orchestrator.devops_projects.fetch import Cache
from orchestrator.devops_projects.generate import Generator
from orchestrator.devops_projects.issue_text import Failure
from orchestrator.devops_projects.run import contract_meta, default_cache

SAMPLE = """package sample;

import java.util.ArrayList;
import java.util.List;

public final class Ranges {
    private int count;

    /** The values of [low, high) in steps. */
    public List<Integer> range(int low, int high, int step) {
        List<Integer> out = new ArrayList<>();
        for (int i = low; i < high; i += step) {
            out.add(i);
            count++;
        }
        if (out.size() > 3) {
            out.remove(0);
        }
        return out;
    }

    public int clamp(int value, int low, int high) {
        if (!(value >= low)) {
            return low;
        }
        return value > high ? high : value - 0 * low;
    }

    public boolean valid(int a, int b) {
        if (a == b && a != 0) {
            return false;
        }
        return Math.max(a, b) <= 10;
    }

    public int count() {
        return count;
    }
}
"""

TESTS = """package sample;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class RangesTest {

    /** Empty when low is past high. */
    @Test
    public void testEmpty() {
        assertEquals(0, new Ranges().range(3, 1, 1).size());
    }

    @Test
    public void testClamp() {
        assertEquals(2,
                new Ranges().clamp(1, 2, 5));
    }

    public static class Nested {
        @Test
        public void testValid() {
            assertEquals(true, new Ranges().valid(1, 2));
        }
    }
}
"""


@pytest.fixture(scope="module")
def classpath() -> str:
    if not shutil.which("javac") or not shutil.which("java"):
        pytest.skip("no JDK on this machine")
    return mutate.javamutate_classpath(default_cache().root)


def test_java_mutations_cover_every_kind_exactly_and_every_mutant_compiles(tmp_path: Path, classpath: str) -> None:
    src = tmp_path / "src" / "main" / "java" / "sample"
    src.mkdir(parents=True)
    (src / "Ranges.java").write_text(SAMPLE)
    rel = "src/main/java/sample/Ranges.java"
    found = mutate.java_mutations(classpath, tmp_path, [rel])
    assert {m.kind for m in found} == set(mutate.KINDS)
    assert found == mutate.java_mutations(classpath, tmp_path, [rel])  # the same list, in the same order
    assert found == sorted(found, key=lambda m: m.key)
    described = {m.describe() for m in found}
    for expected in ("operator: '<' -> '<='", "operator: '+=' -> '-='", "operator: '++' -> '--'",
                     "operator: '&&' -> '||'", "operator: 'false' -> 'true'", "boundary: '3' -> '4'",
                     "condition: '!' -> ''", "condition: 'a == b && a != 0' -> '!(a == b && a != 0)'",
                     "statement: 'out.add(i);' -> ''", "arguments: 'a, b' -> 'b, a'",
                     "operands: 'value - 0 * low' -> '0 * low - value'"):
        assert any(expected in d for d in described), expected
    assert not any("assert" in m.before for m in found)
    assert {m.function for m in found} == {"Ranges.range", "Ranges.clamp", "Ranges.valid"}
    # every mutant is an exact edit of the file, and each compiles (one javac run: a package per mutant)
    mutants = tmp_path / "mutants"
    for i, m in enumerate(found):
        edit = mutate.mutation_edit(SAMPLE, m)
        text = mutate.apply_edit(SAMPLE, edit)
        assert text != SAMPLE and mutate.apply_edit(text, {**edit, "old": edit["new"], "new": edit["old"]}) == SAMPLE
        (mutants / f"m{i}").mkdir(parents=True)
        (mutants / f"m{i}" / "Ranges.java").write_text(text.replace("package sample;", f"package m{i};"))
    proc = subprocess.run(["javac", "-nowarn", "-d", str(tmp_path / "classes"),
                           *sorted(str(p) for p in mutants.rglob("*.java"))], capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_hiding_junit_methods_keeps_the_rest_with_their_javadoc_gone(tmp_path: Path, classpath: str) -> None:
    rel = "src/test/java/sample/RangesTest.java"
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(TESTS)
    edits = mutate.java_hide_tests(classpath, tmp_path, rel, ["RangesTest#testEmpty", "RangesTest.Nested#testValid"])
    text = TESTS
    for edit in edits:
        text = mutate.apply_edit(text, edit)
    assert "testEmpty" not in text and "Empty when low" not in text and "testValid" not in text
    assert "public void testClamp()" in text and "public static class Nested {" in text
    assert text.count("@Test") == 1
    with pytest.raises(Exception, match="no method testGone"):
        mutate.java_hide_tests(classpath, tmp_path, rel, ["RangesTest#testGone"])


SUREFIRE = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="sample.RangesTest" tests="3" failures="1" errors="1" skipped="0">
  <testcase name="testEmpty" classname="sample.RangesTest" time="0.01"/>
  <testcase name="testClamp" classname="sample.RangesTest" time="0.01">
    <failure message="expected:&lt;2&gt; but was:&lt;1&gt;" type="java.lang.AssertionError">
java.lang.AssertionError: expected:&lt;2&gt; but was:&lt;1&gt;
	at org.junit.Assert.fail(Assert.java:89)
	at org.junit.Assert.assertEquals(Assert.java:633)
	at sample.RangesTest.testClamp(RangesTest.java:17)
	at java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
</failure>
  </testcase>
  <testcase name="testValid(int)[1]" classname="sample.RangesTest$Nested" time="0.01">
    <error message="boom" type="java.lang.IllegalStateException">java.lang.IllegalStateException: boom
	at sample.Ranges.valid(Ranges.java:31)
	at sample.Ranges.check(Ranges.java:40)
	at sample.RangesTest$Nested.testValid(RangesTest.java:24)
	at org.junit.runners.ParentRunner.run(ParentRunner.java:413)
</error>
  </testcase>
</testsuite>
"""


def _java_bench(tmp_path: Path, mk: str) -> Bench:
    project = cat.load().select(["java-commons-cli"])[0]
    bench = Bench(project, Cache(tmp_path / "cache"), tmp_path / "work")
    rel = bench.root / "src" / "test" / "java" / "sample" / "RangesTest.java"
    rel.parent.mkdir(parents=True)
    rel.write_text(TESTS)
    (bench.root / "opsbench.mk").write_text(mk)
    return bench


def test_a_surefire_report_gives_the_failing_methods_with_the_statement_that_failed(tmp_path: Path) -> None:
    report = tmp_path / "TEST-sample.RangesTest.xml"
    report.write_text(SUREFIRE)
    bench = _java_bench(tmp_path, f"check:\n\tmkdir -p target/surefire-reports\n\tcp {report} target/surefire-reports/"
                                  "\n\texit 1\n")
    suite = bench.run(timeout=30)
    assert not suite.broken and suite.passed == 1
    assert sorted(suite.failed) == ["src/test/java/sample/RangesTest.java::RangesTest.Nested.testValid",
                                    "src/test/java/sample/RangesTest.java::RangesTest.testClamp"]
    clamp = suite.failed["src/test/java/sample/RangesTest.java::RangesTest.testClamp"]
    assert clamp.test == "testClamp" and clamp.detail.startswith("> assertEquals(2,\n> new Ranges().clamp(1, 2, 5));\n")
    title, body = issue_text.write_issue("java-commons-cli", "java", "commons-cli:commons-cli",
                                         list(suite.failed.values()))
    assert "new Ranges().clamp(1, 2, 5));" in body and "expected:<2> but was:<1>" in body
    assert "IllegalStateException: boom" in body and "at Ranges.valid(...)" in body and "at Ranges.check(...)" in body
    assert "`clamp`" in title
    assert issue_text.leaks(title + body, ["testClamp", "testValid", "RangesTest"]) == []
    assert "Assert.fail" not in body and "ParentRunner" not in body and "JUnit" in body


BASE_TESTS = """package sample;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public abstract class AbstractRangesTestCase {

    protected abstract Ranges ranges();

    @Test
    public void testClampHigh() {
        assertEquals(5, ranges().clamp(9, 1, 5));
    }
}
"""

INHERITED = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="sample.RangesTest" tests="2" failures="1" errors="0" skipped="0">
  <testcase name="testEmpty" classname="sample.RangesTest" time="0.01"/>
  <testcase name="testClampHigh" classname="sample.RangesTest" time="0.01">
    <failure message="expected:&lt;5&gt; but was:&lt;9&gt;" type="java.lang.AssertionError">
java.lang.AssertionError: expected:&lt;5&gt; but was:&lt;9&gt;
	at org.junit.Assert.fail(Assert.java:89)
	at org.junit.Assert.assertEquals(Assert.java:633)
	at sample.AbstractRangesTestCase.testClampHigh(AbstractRangesTestCase.java:13)
	at java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
</failure>
  </testcase>
</testsuite>
"""


def test_an_inherited_test_is_read_as_its_base_class_method_and_never_quoted(tmp_path: Path) -> None:
    """Surefire names the subclass that ran an inherited test; the method is declared (and must be hidden) in the
    base class its frame names, and that frame is the test's, not the library's (commons-cli's parser tests)."""
    report = tmp_path / "TEST-sample.RangesTest.xml"
    report.write_text(INHERITED)
    bench = _java_bench(tmp_path, f"check:\n\tmkdir -p target/surefire-reports\n\tcp {report} target/surefire-reports/"
                                  "\n\texit 1\n")
    (bench.root / "src" / "test" / "java" / "sample" / "AbstractRangesTestCase.java").write_text(BASE_TESTS)
    suite = bench.run(timeout=30)
    assert not suite.broken and suite.passed == 1
    rel = "src/test/java/sample/AbstractRangesTestCase.java"
    assert list(suite.failed) == [f"{rel}::AbstractRangesTestCase.testClampHigh"]
    failure = suite.failed[f"{rel}::AbstractRangesTestCase.testClampHigh"]
    assert failure.file == rel and failure.detail.startswith("> assertEquals(5, ranges().clamp(9, 1, 5));\n")
    title, body = issue_text.write_issue("java-commons-cli", "java", "commons-cli:commons-cli", [failure])
    assert "expected:<5> but was:<9>" in body and "AbstractRangesTestCase" not in body
    assert issue_text.leaks(title + body, ["testClampHigh", "AbstractRangesTestCase.java"]) == []


def test_a_test_method_of_no_test_file_is_still_reported_under_surefires_class(tmp_path: Path) -> None:
    """A frame of the failing method's name in a class outside the test sources does not move the failure."""
    report = tmp_path / "TEST-sample.RangesTest.xml"
    report.write_text(INHERITED.replace("sample.AbstractRangesTestCase.testClampHigh(AbstractRangesTestCase.java:13)",
                                        "other.Elsewhere.testClampHigh(Elsewhere.java:13)"))
    bench = _java_bench(tmp_path, f"check:\n\tmkdir -p target/surefire-reports\n\tcp {report} target/surefire-reports/"
                                  "\n\texit 1\n")
    suite = bench.run(timeout=30)
    assert list(suite.failed) == ["src/test/java/sample/RangesTest.java::RangesTest.testClampHigh"]


def test_a_mutant_that_does_not_compile_is_broken_not_read_from_old_reports(tmp_path: Path) -> None:
    bench = _java_bench(tmp_path, "check:\n\t@echo '[ERROR] COMPILATION ERROR : Ranges.java:[3,1] cannot find symbol'"
                                  "\n\texit 1\n")
    old = bench.root / "target" / "surefire-reports" / "TEST-sample.RangesTest.xml"
    old.parent.mkdir(parents=True)
    old.write_text(SUREFIRE)  # a previous run's report
    suite = bench.run(timeout=30)
    assert "does not compile" in suite.broken and not suite.failed and not old.exists()


def test_java_hidden_tests_come_back_renamed(tmp_path: Path) -> None:
    rel = "src/test/java/sample/RangesTest.java"
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(TESTS.replace("public void testEmpty", "void testEmpty"))
    edits = testgen.reference_tests(tmp_path, [rel], [Failure("testEmpty", rel, ""), Failure("testValid", rel, "")])
    assert edits is not None
    [edit] = edits
    assert "void testEmpty_reproduces()" in edit["content"] and "public void testValid_reproduces()" in edit["content"]
    assert "public void testClamp()" in edit["content"]


# -- test generation drawn alone equals test generation drawn after the issue family ------------------------------

N = 24
LIB = "package lib\n\n" + "".join(f"func F{i}(x int) int {{\n\tif x < {i} {{\n\t\treturn {i}\n\t}}\n\treturn x\n}}\n\n"
                                  for i in range(N))
LIB_TESTS = 'package lib\n\nimport "testing"\n\n' + "".join(
    f"func TestF{i}(t *testing.T) {{\n\tif got := F{i}(-1); got != {i} {{\n\t\tt.Errorf(\"F{i}(-1) = %d, want {i}\", "
    f"got)\n\t}}\n}}\n\n" for i in range(N))


def _mutants() -> list[mutate.Mutation]:
    lines = LIB.split("\n")
    out = []
    for i in range(N):
        line = lines.index(f"\tif x < {i} {{") + 1
        out.append(mutate.Mutation("lib.go", line, 6, "operator", "<", ">", f"F{i}"))
    return out


def _state(root: Path) -> tuple[int | None, list[str]]:
    """(the mutant applied to root's lib.go or None, the test functions root has)."""
    text = (root / "lib.go").read_text()
    applied = next((i for i, m in enumerate(_mutants())
                    if mutate.apply_edit(LIB, mutate.mutation_edit(LIB, m)) == text), None)
    tests = [n for p in sorted(root.glob("*_test.go")) for n in re.findall(r"^func (Test\w+)\(", p.read_text(), re.M)]
    return applied, tests


def _failing(applied: int | None, tests: list[str]) -> list[str]:
    """A mutant F_i with i % 3 != 0 is caught by TestF_i (given back renamed or not); the others survive."""
    if applied is None or applied % 3 == 0:
        return []
    return [t for t in tests if t in (f"TestF{applied}", f"TestF{applied}Reproduces")]


class FakeGoBench:
    def __init__(self, pristine: Path, root: Path) -> None:
        shutil.copytree(pristine, root)
        self.root, self.runs = root, 0

    def mutations(self) -> list[mutate.Mutation]:
        return _mutants()

    @contextmanager
    def applied(self, edits: list[dict[str, str]]) -> Iterator[None]:
        saved = {e["path"]: (self.root / e["path"]).read_text() for e in edits}
        try:
            for e in edits:
                file = self.root / e["path"]
                file.write_text(mutate.apply_edit(file.read_text(), e))
            yield
        finally:
            for rel, text in saved.items():
                (self.root / rel).write_text(text)

    def run(self) -> Suite:
        self.runs += 1
        applied, tests = _state(self.root)
        failing = _failing(applied, tests)
        return Suite(failed={f".::{t}": Failure(t, ".", f"    lib_test.go:7: F{applied}(-1) = -1, want {applied}\n")
                             for t in failing}, passed=len(tests) - len(failing))

    def hide_edits(self, failed: dict[str, Failure]) -> list[dict[str, str]]:
        text, edits = LIB_TESTS, []
        for f in failed.values():
            start = text.index(f"func {f.test}(")
            edit = mutate.unique_edit(text, start, text.index("}\n\n", text.index("t.Errorf", start)) + 3, "",
                                      "lib_test.go")
            edits.append(edit)
            text = mutate.apply_edit(text, edit)
        return edits


def _check(root: Path) -> tuple[int, int, int, bool]:
    applied, tests = _state(root)
    failed = len(_failing(applied, tests))
    return (1 if failed else 0), len(tests) - failed, failed, True


def _generator(tmp_path: Path, name: str) -> Generator:
    pristine = tmp_path / "pristine"
    if not pristine.exists():
        pristine.mkdir()
        (pristine / "lib.go").write_text(LIB)
        (pristine / "lib_test.go").write_text(LIB_TESTS)
    project = cat.load().select(["go-semver"])[0]
    gen = Generator(project, Cache(tmp_path / "cache"), tmp_path / name, "seed-7")
    gen.bench = FakeGoBench(pristine, tmp_path / name / "bench-tree")  # type: ignore[assignment]
    gen.check = _check  # type: ignore[assignment]
    gen.pristine, gen.tests, gen.prepared = pristine, N, True
    gen.meta = contract_meta(project, N)
    return gen


def _ids(gen: Generator, family: str) -> list[str]:
    """The kept instances' ids with the line of their mutant (`id@line`)."""
    report = gen.run(family, 3, 40)
    assert not report.error, report.error
    return [f"{i.id}@{i.provenance['mutation']['line']}" for i in report.instances]


def test_a_testgen_draw_is_the_same_alone_and_after_the_issue_family(tmp_path: Path) -> None:
    alone = _ids(_generator(tmp_path, "alone"), "testgen")
    both = _generator(tmp_path, "both")
    issues = _ids(both, "issue")
    after = _ids(both, "testgen")
    assert alone and issues  # each family kept something: the comparison is not of two empty lists
    assert after == alone
    # and the other way round: the issue family's draw does not depend on test generation having run first
    first = _generator(tmp_path, "first")
    _ids(first, "testgen")
    assert _ids(first, "issue") == issues
    # one task per mutant: the two families' mutants are disjoint
    testgen_muts = {m.key for m in _mutants() if testgen.testgen_share("seed-7", "go-semver", m)}
    assert testgen_muts and len(testgen_muts) < N
    assert not {i.split("@")[1] for i in issues} & {i.split("@")[1] for i in alone}


def test_the_split_between_issue_and_testgen_is_a_pure_function_of_seed_project_and_mutant() -> None:
    muts = _mutants()
    share = [testgen.testgen_share("s", "p", m) for m in muts]
    assert share == [testgen.testgen_share("s", "p", m) for m in muts]
    assert share != [testgen.testgen_share("t", "p", m) for m in muts]
    assert testgen.testgen_order(muts, "s", "p") == tasks.draw_order(muts, "s", "p", "testgen")
