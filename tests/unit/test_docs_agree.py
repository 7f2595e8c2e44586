"""The hand-written docs agree with the code they describe.

- README.md's CLI table has a row for every command of the `opsbench` click group (and every subcommand of its
  groups), and no row for a command that does not exist;
- `make help` lists every make target README.md names, and only targets the Makefile has;
- docs/architecture.md's module table has one row per Python module under orchestrator/ (templates aside), and its
  evaluator table maps every `roles/evaluate_*` role to the scoring module its Ansible module imports;
- no doc names an internal issue number (name the capability instead).

Each check is a function from text to what is missing, so the last test can prove that every check fails on a
document that lacks what it checks for.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import click

from orchestrator import paths
from orchestrator.cli import main as opsbench_main

ROOT = paths.PROJECT_ROOT
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Modules that the split of lifecycle.py introduces; architecture.md may name them before they exist.
PENDING_MODULES = {"orchestrator/lifecycle.py", "orchestrator/trials.py", "orchestrator/run_vars.py",
                   "orchestrator/ports.py", "orchestrator/interrupts.py"}

# An internal issue number: "issue 21", "issues 19 and 20", "#21" (not "libpod#4113", not an anchor "#4-isolation"),
# "wave 2".
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+|(?<![\w/.(-])#\d+(?![\w-])|\bwaves? \d+", re.IGNORECASE)


# -- parsing helpers ---------------------------------------------------------------------------------------------

def section(text: str, heading: str) -> str:
    """The body of the markdown section whose heading line is `heading`, up to the next heading of its level."""
    lines = text.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    starts = [i for i, line in enumerate(lines) if line.strip() == heading]
    if not starts:
        return ""
    body = []
    for line in lines[starts[0] + 1:]:
        hashes = len(line) - len(line.lstrip("#"))
        if 0 < hashes <= level and line[hashes:hashes + 1] == " ":
            break
        body.append(line)
    return "\n".join(body)


def table_rows(text: str) -> list[list[str]]:
    """Cells of every markdown table row in `text`, header and separator rows left out (`\\|` is no separator)."""
    def cells(line: str) -> list[str] | None:
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|") and len(line) > 1):
            return None
        return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]

    def separator(row: list[str] | None) -> bool:
        return row is not None and all(c and set(c) <= {"-", ":"} for c in row)

    parsed = [cells(line) for line in text.splitlines()]
    return [row for row, after in zip(parsed, [*parsed[1:], None], strict=True)
            if row is not None and not separator(row) and not separator(after)]


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# -- README's CLI table ------------------------------------------------------------------------------------------

def cli_table_gaps(readme: str, group: click.Group) -> list[str]:
    """What README's `opsbench` CLI table lacks or names wrongly, one message per problem."""
    commands: list[list[str]] = []
    for row in table_rows(section(readme, "## The `opsbench` CLI")):
        spans = code_spans(row[0])
        if spans and spans[0].startswith("opsbench "):
            commands.append(spans[0].split()[1:])
    problems = []
    for name, command in sorted(group.commands.items()):
        rows = [words for words in commands if words and words[0] == name]
        if not rows:
            problems.append(f"no row for `opsbench {name}`")
            continue
        if isinstance(command, click.Group):
            named = {word for words in rows for word in words[1:]}
            problems += [f"no row names `opsbench {name} {sub}`" for sub in sorted(command.commands)
                         if sub not in named]
    problems += [f"row `opsbench {words[0] if words else ''}` names no command"
                 for words in commands if not words or words[0] not in group.commands]
    return problems


def test_readme_cli_table_covers_every_command_group() -> None:
    gaps = cli_table_gaps(README.read_text(), opsbench_main)
    assert gaps == [], f"README.md, section 'The `opsbench` CLI': {gaps}"


# -- make help ---------------------------------------------------------------------------------------------------

def readme_make_targets(readme: str) -> set[str]:
    """Targets README names as `make <target>`: in a code span, or at the start of a line of a code block."""
    blocks = "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", readme, re.MULTILINE | re.DOTALL))
    return set(re.findall(r"`make ([a-z][a-z0-9-]*)", readme)) | set(re.findall(r"^make ([a-z][a-z0-9-]*)", blocks,
                                                                                  re.MULTILINE))


def help_targets(help_text: str) -> set[str]:
    """Targets `make help` lists: `make a`, `make a [ARGS]` or `make a | b | c` at the start of a line."""
    targets: set[str] = set()
    for line in help_text.splitlines():
        match = re.match(r"make ([a-z][a-z0-9-]*(?:\s*\|\s*[a-z][a-z0-9-]*)*)", line.strip())
        if match:
            targets |= {t.strip() for t in match.group(1).split("|")}
    return targets


def makefile_targets(makefile: str) -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*)\s*:(?!=)", makefile, re.MULTILINE))


def make_help() -> str:
    proc = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, f"`make -s help` failed: {proc.stderr}"
    return proc.stdout


def test_make_help_lists_every_target_the_readme_names() -> None:
    listed = help_targets(make_help())
    defined = makefile_targets((ROOT / "Makefile").read_text())
    named = readme_make_targets(README.read_text()) - {"help"}  # `make help` is the list itself
    assert named, "found no `make <target>` in README.md: the pattern no longer matches how README names targets"
    assert sorted(named - listed) == [], f"README.md names make targets that `make help` does not list: " \
                                         f"{sorted(named - listed)}"
    assert sorted(named - defined) == [], f"README.md names make targets the Makefile lacks: {sorted(named - defined)}"
    assert sorted(listed - defined) == [], f"`make help` lists targets the Makefile lacks: {sorted(listed - defined)}"


# -- architecture.md ---------------------------------------------------------------------------------------------

def orchestrator_modules(root: Path = ROOT) -> set[str]:
    """Every Python module under orchestrator/ except the templates the scaffolder copies."""
    base = root / "orchestrator"
    return {p.relative_to(root).as_posix() for p in base.rglob("*.py")
            if "templates" not in p.relative_to(base).parts and "__pycache__" not in p.parts}


def module_rows(architecture: str) -> list[str]:
    """The module each row of architecture.md's module table is about (its first cell: one `orchestrator/...py`)."""
    rows = []
    for row in table_rows(section(architecture, "## Modules")):
        spans = [s for s in code_spans(row[0]) if s.startswith("orchestrator/")]
        rows.append(spans[0] if len(spans) == 1 else f"<row whose first cell is not one module: {row[0]}>")
    return rows


def module_table_gaps(architecture: str, modules: set[str]) -> list[str]:
    rows = module_rows(architecture)
    problems = [f"no row for {m}" for m in sorted(modules - set(rows))]
    problems += [f"two rows for {m}" for m in sorted({r for r in rows if rows.count(r) > 1})]
    problems += [f"a row for {r}, which does not exist" for r in sorted(set(rows) - modules - PENDING_MODULES)]
    return problems


def test_architecture_has_a_row_per_orchestrator_module() -> None:
    modules = orchestrator_modules()
    assert "orchestrator/runner.py" in modules, "orchestrator_modules() found no modules: the walk is broken"
    gaps = module_table_gaps(ARCHITECTURE.read_text(), modules)
    assert gaps == [], f"docs/architecture.md, section 'Modules': {gaps}"


def scoring_modules(library: Path, root: Path = ROOT) -> set[str]:
    """The orchestrator modules an evaluator role's Ansible modules import, as paths; a name re-exported by a
    package (`from orchestrator.evaluation import score_diagnosis`) resolves to the module that defines it."""
    found = set()
    for source in sorted(library.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("orchestrator")):
                continue
            package = node.module.replace(".", "/")
            for alias in node.names:
                if (root / package / f"{alias.name}.py").is_file():
                    found.add(f"{package}/{alias.name}.py")
                elif (root / f"{package}.py").is_file():
                    found.add(f"{package}.py")
                else:
                    found.add(reexported_from(root / package / "__init__.py", alias.name, root))
    return found


def reexported_from(init: Path, name: str, root: Path) -> str:
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            return node.module.replace(".", "/") + ".py"
    return init.relative_to(root).as_posix()


def evaluator_table_gaps(architecture: str, imports: dict[str, set[str]]) -> list[str]:
    """`imports`: evaluator role -> the modules it imports; each needs a row naming the role and those modules."""
    rows = {}
    for row in table_rows(section(architecture, "## Evaluators")):
        spans = code_spans(row[0])
        if spans:
            rows[spans[0]] = {s for cell in row[1:] for s in code_spans(cell)}
    problems = []
    for role, modules in sorted(imports.items()):
        if role not in rows:
            problems.append(f"no row for {role}")
        elif not modules:
            problems.append(f"{role} imports no orchestrator module (the table then has nothing to say)")
        else:
            problems += [f"the row of {role} does not name {m}" for m in sorted(modules - rows[role])]
    problems += [f"a row for {role}, which is no evaluator role" for role in sorted(set(rows) - set(imports))]
    return problems


def evaluator_imports(root: Path = ROOT) -> dict[str, set[str]]:
    return {role.name: scoring_modules(role / "library", root) for role in sorted((root / "roles").glob("evaluate_*"))}


def test_architecture_maps_every_evaluator_role_to_its_scoring_module() -> None:
    imports = evaluator_imports()
    assert "evaluate_diagnosis" in imports, "found no roles/evaluate_*: the walk is broken"
    gaps = evaluator_table_gaps(ARCHITECTURE.read_text(), imports)
    assert gaps == [], f"docs/architecture.md, section 'Evaluators': {gaps}"


# -- internal issue numbers --------------------------------------------------------------------------------------

def issue_numbers(text: str) -> list[str]:
    """`line: text` of every internal issue number in a document."""
    return [f"{n}: {m.group(0)!r}" for n, line in enumerate(text.splitlines(), 1)
            for m in ISSUE_NUMBER.finditer(line)]


def test_docs_name_no_internal_issue_number() -> None:
    found = {}
    for doc in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        hits = issue_numbers(doc.read_text())
        if hits:
            found[doc.relative_to(ROOT).as_posix()] = hits
    assert found == {}, f"internal issue numbers in the docs (name the capability instead): {found}"


# -- each check can fail -----------------------------------------------------------------------------------------

def test_each_check_fails_on_a_document_that_lacks_what_it_checks() -> None:
    group = click.Group(commands=[click.Command("run"), click.Group("awx", commands=[click.Command("export"),
                                                                                  click.Command("ee")])])
    readme = ("## The `opsbench` CLI\n\n| Command | What it does |\n| --- | --- |\n"
              "| `opsbench run SCENARIO` | one run |\n| `opsbench awx export [-o F]` | export |\n"
              "| `opsbench gone` | retired |\n\n## Next\n\n| `opsbench awx ee` | outside the section |\n")
    assert cli_table_gaps(readme, group) == ["no row names `opsbench awx ee`", "row `opsbench gone` names no command"]
    without_run = readme.replace("| `opsbench run SCENARIO` | one run |\n", "")
    assert "no row for `opsbench run`" in cli_table_gaps(without_run, group)

    readme_text = "Run `make test`, then:\n```sh\nmake bench-local   # x\n```\nmake sure, at a line's start in prose"
    assert readme_make_targets(readme_text) == {"test", "bench-local"}
    assert help_targets("make setup     create\nmake scenario NAME=<id>  run\nmake validate | docs | clean\n") == \
        {"setup", "scenario", "validate", "docs", "clean"}
    assert makefile_targets("X := 1\nhelp:\n\t@echo\ntest-unit: venv\n.PHONY: help\n") == {"help", "test-unit"}

    arch = ("## Modules\n\n| Module | Holds |\n| --- | --- |\n| `orchestrator/a.py` | a |\n"
            "| `orchestrator/a.py` | a again |\n| `orchestrator/gone.py` | retired |\n"
            "| `orchestrator/trials.py` | pending |\n\n## Evaluators\n\n| Role | Scoring module |\n| --- | --- |\n"
            "| `evaluate_x` | `orchestrator/evaluation/x.py` |\n| `evaluate_old` | `orchestrator/old.py` |\n")
    assert module_table_gaps(arch, {"orchestrator/a.py", "orchestrator/b.py"}) == [
        "no row for orchestrator/b.py", "two rows for orchestrator/a.py",
        "a row for orchestrator/gone.py, which does not exist"]
    assert evaluator_table_gaps(arch, {"evaluate_x": {"orchestrator/evaluation/y.py"}, "evaluate_z": set()}) == [
        "the row of evaluate_x does not name orchestrator/evaluation/y.py", "no row for evaluate_z",
        "a row for evaluate_old, which is no evaluator role"]

    assert issue_numbers("## Live trial speed (issue 23)\nissues 19 and 20; see #21\nwave 2 adds\n"
                         "containers/libpod#4113 and [audit](#4-isolation-audit) are fine\n") == [
        "1: 'issue 23'", "2: 'issues 19'", "2: '#21'", "3: 'wave 2'"]
