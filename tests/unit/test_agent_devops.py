"""The scripted build fixer against a fake terminal: each remedy of its rulebook reads the failure the real tools
print (messages taken from live runs in the workspace image), looks at what the workspace has, and edits the right
file; the loop stops when the gate passes or no remedy matches. Live: tests/e2e/test_devops_scenarios.py."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from orchestrator.agents import devops

MAVEN_UNRESOLVED = (
    "[ERROR] Failed to execute goal on project stockkeeper: Could not resolve dependencies for project "
    "org.opsbench:stockkeeper:jar:1.4.0: Cannot access central (https://repo.maven.apache.org/maven2) in offline mode "
    "and the artifact junit:junit:jar:4.13.5 has not been downloaded from it before. -> [Help 1]")
PY_MISSING = ("src/invoicer/terms.py:10: in <module>\n    from dateutil.relativedelta import relativedelta\n"
              "E   ModuleNotFoundError: No module named 'dateutil'\nmake: *** [Makefile:15: check] Error 2")
PY_REQUIRES = "ERROR: Package 'invoicer' requires a different Python: 3.11.2 not in '>=3.12'"
PIP_PIN = ("ERROR: Could not find a version that satisfies the requirement python-dateutil==2.8.1 (from invoicer) "
           "(from versions: 2.9.0.post0)\nERROR: No matching distribution found for python-dateutil==2.8.1")
GO_TOOLCHAIN = "go: errors parsing go.mod:\n/workspace/ratelimit/go.mod:5: unknown directive: toolchain"
JAVA_RELEASE = "[ERROR] Failed to execute goal ...: Fatal error compiling: error: release version 21 not supported"
JAVA_HOME = "The JAVA_HOME environment variable is not defined correctly,\nthis environment variable is needed"

POM = """<project>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <junit.version>4.13.5</junit.version>
  </properties>
  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>${junit.version}</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
"""
PYPROJECT = '[project]\nname = "invoicer"\nrequires-python = ">=3.12"\ndependencies = []\n'


class FakeTerminal:
    """The gateway's terminal tools over a dict of files; `gate` says what `make -s check` prints given the files,
    `shell` answers every other command."""

    def __init__(self, project: str, files: dict[str, str], gate: Callable[[dict[str, str]], str],
                 shell: Callable[[str], tuple[int, str]] = lambda cmd: (1, "")) -> None:
        self.project, self.files, self.gate, self.shell = project, dict(files), gate, shell
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, tool: str, **args: Any) -> Any:
        self.calls.append((tool, args))
        if tool == "list_files":
            names = {p.split("/", 1)[0] for p in self.files} if args["path"] == self.project else {self.project}
            prefix = f"{args['path']}/" if args["path"] != "." else ""
            return {"items": [{"path": f"{prefix}{n}", "type": "dir" if args["path"] == "." else "file"}
                              for n in sorted(names)], "total": len(names)}
        if tool == "read_file":
            return {"content": self.files[args["path"].removeprefix(f"{self.project}/")]}
        if tool == "write_file":
            self.files[args["path"].removeprefix(f"{self.project}/")] = args["content"]
            return {"bytes_written": len(args["content"])}
        assert tool == "exec"
        if args["command"] == devops.GATE:
            log = self.gate(self.files)
            return {"exit_code": 2 if log else 0, "stdout": log, "stderr": ""}
        rc, out = self.shell(args["command"])
        return {"exit_code": rc, "stdout": out, "stderr": ""}


def test_an_unresolvable_maven_artifact_is_pinned_to_what_the_repository_has() -> None:
    def shell(cmd: str) -> tuple[int, str]:
        if cmd.startswith("ls /usr/share/maven-repo/junit/junit"):
            return 0, "4.13.2\ndebian\n"
        return (0, "/usr/share/maven-repo\n") if "localRepository" in cmd else (1, "")
    term = FakeTerminal("stockkeeper", {"pom.xml": POM, "Makefile": ""},
                        lambda f: MAVEN_UNRESOLVED if "4.13.5" in f["pom.xml"] else "", shell)
    report = devops.fix(term, "stockkeeper")
    assert "<junit.version>4.13.2</junit.version>" in term.files["pom.xml"]
    assert "${junit.version}" in term.files["pom.xml"]  # the property changed, not the reference
    assert report["changed_files"] == ["stockkeeper/pom.xml"] and report["summary"].startswith("`make -s check` passes")


def test_a_python_module_nobody_declares_is_declared_from_the_wheel_cache() -> None:
    pyproject = PYPROJECT.replace(">=3.12", ">=3.11")
    term = FakeTerminal("invoicer", {"pyproject.toml": pyproject, "src/x.py": ""},
                        lambda f: PY_MISSING if "dateutil" not in f["pyproject.toml"] else "",
                        lambda cmd: (0, "python-dateutil 2.9.0.post0\n") if "zipfile" in cmd else (1, ""))
    devops.fix(term, "invoicer")
    assert 'dependencies = ["python-dateutil>=2.9.0.post0"]' in term.files["pyproject.toml"]


def test_requires_python_then_a_pin_two_rounds() -> None:
    pinned = PYPROJECT.replace("dependencies = []", 'dependencies = ["python-dateutil==2.8.1"]')

    def gate(f: dict[str, str]) -> str:
        if ">=3.12" in f["pyproject.toml"]:
            return PY_REQUIRES
        return PIP_PIN if "==2.8.1" in f["pyproject.toml"] else ""

    def shell(cmd: str) -> tuple[int, str]:
        if cmd.startswith("pip3 config list"):
            return 0, "global.find-links='/opt/wheels'\n"
        if cmd.startswith("ls /opt/wheels"):
            return 0, "pytest-8.3.5-py3-none-any.whl\npython_dateutil-2.9.0.post0-py2.py3-none-any.whl\n"
        return 1, ""
    term = FakeTerminal("invoicer", {"pyproject.toml": pinned}, gate, shell)
    report = devops.fix(term, "invoicer")
    assert 'requires-python = ">=3.11"' in term.files["pyproject.toml"]
    assert '"python-dateutil==2.9.0.post0"' in term.files["pyproject.toml"]
    assert report["summary"].startswith("`make -s check` passes") and len(report["summary"].split("; ")) == 2


def test_a_build_backend_pin_is_looked_up_where_the_failing_pip_looked() -> None:
    """An upstream project's contract passes its own --find-links (live, python-idna's `flit_core==3.8.0` in the
    workspace, 2026-12-05): the cache pip config names lacks the wheel, the one pip looked in has it."""
    pyproject = '[build-system]\nrequires = ["flit_core==3.8.0"]\nbuild-backend = "flit_core.buildapi"\n'
    log = ("  \u2570\u2500> [3 lines of output]\n      Looking in links: /opt/wheels, /opt/opsbench-deps/wheels\n"
           "      ERROR: Could not find a version that satisfies the requirement flit_core==3.8.0 "
           "(from versions: 3.9.0)\n"
           "      ERROR: No matching distribution found for flit_core==3.8.0\n      [end of output]\n"
           "error: subprocess-exited-with-error\nmake: *** [opsbench.mk:16: build] Error 1")

    def shell(cmd: str) -> tuple[int, str]:
        if cmd.startswith("pip3 config list"):
            return 0, "global.find-links='/opt/wheels'\npytest-8.3.5-py3-none-any.whl\n"
        if cmd == "ls /opt/wheels /opt/opsbench-deps/wheels 2>/dev/null":
            return 0, ("/opt/opsbench-deps/wheels:\nflit_core-3.9.0-py3-none-any.whl\npytest-8.3.5-py3-none-any.whl\n\n"
                       "/opt/wheels:\npytest-8.3.5-py3-none-any.whl\n")
        if cmd.startswith("ls /opt/wheels"):
            return 0, "pytest-8.3.5-py3-none-any.whl\n"
        return 1, ""
    term = FakeTerminal("python-idna", {"pyproject.toml": pyproject},
                        lambda f: log if "3.8.0" in f["pyproject.toml"] else "", shell)
    report = devops.fix(term, "python-idna")
    assert 'requires = ["flit_core==3.9.0"]' in term.files["pyproject.toml"]
    assert report["changed_files"] == ["python-idna/pyproject.toml"]
    assert "is not in the wheel cache" in report["summary"]


def test_a_newer_go_mod_targets_the_installed_go() -> None:
    term = FakeTerminal("ratelimit", {"go.mod": "module x\n\ngo 1.21\n\ntoolchain go1.21.6\n"},
                        lambda f: GO_TOOLCHAIN if "toolchain" in f["go.mod"] else "",
                        lambda cmd: (0, "go1.19.8\n") if cmd == "go env GOVERSION" else (1, ""))
    devops.fix(term, "ratelimit")
    assert term.files["go.mod"] == "module x\n\ngo 1.19\n"


def test_a_renamed_go_module_gets_the_path_its_code_imports_back() -> None:
    log = ("cmd/limitcheck/main.go:16:2: cannot find module providing package opsbench.local/ratelimit/internal/x: "
           "import lookup disabled by -mod=readonly")
    term = FakeTerminal("ratelimit", {"go.mod": "module github.com/opsbench/ratelimit\n\ngo 1.19\n"},
                        lambda f: log if "github.com" in f["go.mod"] else "")
    devops.fix(term, "ratelimit")
    assert term.files["go.mod"] == "module opsbench.local/ratelimit\n\ngo 1.19\n"


def test_a_java_release_newer_than_the_jdk_is_lowered_to_the_jdk() -> None:
    pom = POM.replace("<maven.compiler.release>17", "<maven.compiler.release>21")
    term = FakeTerminal("stockkeeper", {"pom.xml": pom},
                        lambda f: JAVA_RELEASE if "release>21" in f["pom.xml"] else "",
                        lambda cmd: (0, "javac 17.0.13\n") if cmd.startswith("javac") else (1, ""))
    devops.fix(term, "stockkeeper")
    assert "<maven.compiler.release>17</maven.compiler.release>" in term.files["pom.xml"]


def test_a_build_variable_naming_a_missing_path_is_repointed_or_dropped() -> None:
    env = "JAVA_HOME=/usr/lib/jvm/java-21-openjdk-amd64\nMAVEN_OPTS=-Xmx512m\nGOROOT=/usr/local/go1.21\n"

    def shell(cmd: str) -> tuple[int, str]:
        if cmd.startswith("test -e"):
            return 1, ""
        return (0, "/usr/lib/jvm/default-java\n") if "bin/javac" in cmd else (1, "")
    term = FakeTerminal("stockkeeper", {"build.env": env, "pom.xml": POM},
                        lambda f: JAVA_HOME if "java-21" in f["build.env"] else "", shell)
    devops.fix(term, "stockkeeper")
    assert term.files["build.env"] == "JAVA_HOME=/usr/lib/jvm/default-java\nMAVEN_OPTS=-Xmx512m\n"


def test_conflict_markers_keep_our_side() -> None:
    pom = POM.replace("    <junit.version>4.13.5</junit.version>\n",
                      "<<<<<<< HEAD\n    <junit.version>4.13.2</junit.version>\n=======\n    <x>1</x>\n"
                      ">>>>>>> feature/y\n")
    term = FakeTerminal("stockkeeper", {"pom.xml": pom},
                        lambda f: "Non-parseable POM" if "<<<<" in f["pom.xml"] else "",
                        lambda cmd: (0, "./pom.xml\n") if cmd.startswith("grep -rlE") else (1, ""))
    devops.fix(term, "stockkeeper")
    assert "<<<<" not in term.files["pom.xml"] and "<x>1</x>" not in term.files["pom.xml"]
    assert "<junit.version>4.13.2</junit.version>" in term.files["pom.xml"]


def test_no_remedy_stops_and_says_so_without_touching_anything() -> None:
    term = FakeTerminal("invoicer", {"pyproject.toml": PYPROJECT.replace(">=3.12", ">=3.11")},
                        lambda f: "FAILED tests/test_terms.py::test_month_end - AssertionError")
    report = devops.fix(term, "invoicer")
    assert report["changed_files"] == [] and "no remedy of the rulebook matches" in report["summary"]
    assert sum(1 for tool, args in term.calls if tool == "exec" and args["command"] == devops.GATE) == 1
    # Rules for other languages' build files cost no calls: the project's files are listed once.
    assert [tool for tool, _ in term.calls].count("list_files") == 1
    assert not any(tool == "read_file" and re.search(r"pom\.xml|go\.mod|build\.env", args["path"])
                   for tool, args in term.calls)


def test_run_fixes_each_fix_task_and_leaves_write_tests_alone() -> None:
    term = FakeTerminal("invoicer", {"pyproject.toml": PYPROJECT}, lambda f: PY_REQUIRES if ">=3.12" in
                        f["pyproject.toml"] else "")
    manifest = {"tasks": [{"id": "a", "kind": "fix", "goal": "CI is red for /workspace/invoicer: fix it"},
                          {"id": "b", "kind": "write-tests", "goal": "Write a test for /workspace/invoicer"}]}
    output = devops.run(manifest, term)
    assert output is not None and output["schema"] == "opsbench/fix/v1"
    assert output["changed_files"] == ["invoicer/pyproject.toml"]


def test_the_gate_is_the_check_the_goal_names() -> None:
    goal = ("`make -s -f opsbench.mk check` fails in the project at /workspace/go-semver (go). Make the build and "
            "its tests pass again.")
    assert devops.gate_of(goal) == "make -s -f opsbench.mk check"
    assert devops.gate_of("The build of /workspace/ratelimit is broken.") == devops.GATE
    # an upstream project's gate runs where the fixer runs it, and its reports name it
    term = FakeTerminal("go-semver", {"go.mod": "module x\n\ngo 1.30.1\n"}, lambda f: "")
    seen: list[str] = []
    inner = term.__call__

    def call(tool: str, **args: Any) -> Any:
        if tool == "exec":
            seen.append(args["command"])
            return {"exit_code": 0, "stdout": "", "stderr": ""}
        return inner(tool, **args)

    report = devops.fix(call, "go-semver", devops.gate_of(goal))
    assert seen == ["make -s -f opsbench.mk check"] and report["commands"] == ["cd go-semver && make -s -f "
                                                                                "opsbench.mk check"]
