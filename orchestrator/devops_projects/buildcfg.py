"""Build-config tasks on a real project's own build files: the build causes of the hand-written `devops-build-*`
scenarios (docs/devops.md, Families), applied to go.mod, pom.xml, pyproject.toml, setup.cfg and setup.py as
upstream wrote them. Each candidate is a set of exact edits and the reference that undoes them; whether the broken
build really fails and the reference really passes is for the generator's `verify` to prove.

Causes: `unresolvable-pin` (a dependency pinned to a version the offline caches do not hold), `missing-dependency`
(the build backend dropped from the build requirements), `conflict-markers` (an unresolved merge left in the build
file), `toolchain-target` (a language version newer than any installed toolchain), `build-variable` (a build
setting pointing at a path that does not exist: a go.work naming a missing module, a .mvn/maven.config naming
a missing settings file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.devops_projects.catalogue import Project
from orchestrator.devops_projects.mutate import unique_edit

CAUSES = ("unresolvable-pin", "missing-dependency", "conflict-markers", "toolchain-target", "build-variable")
# Versions that exist upstream but are not in the offline caches (the pinned wheels hold other versions).
ABSENT_PINS = {"setuptools": ("58.1.0", "65.5.0", "69.0.3"), "flit_core": ("3.2.0", "3.7.1", "3.8.0"),
               "wheel": ("0.37.1", "0.40.0")}
GO_ABSENT_MODULES = (("golang.org/x/text", "v0.14.0"), ("github.com/stretchr/testify", "v1.8.4"),
                     ("golang.org/x/sys", "v0.15.0"))


@dataclass(frozen=True)
class Candidate:
    cause: str
    detail: str
    edits: list[dict[str, Any]] = field(default_factory=list)
    reference: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.cause}: {self.detail}"


def _line_edit(text: str, path: str, pattern: str, replace: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(edit, reverse) replacing the first match of `pattern` (a regex, multiline) by `replace` (a template)."""
    match = re.search(pattern, text, re.M)
    if not match:
        return None
    new = match.expand(replace)
    edit = unique_edit(text, match.start(), match.end(), new, path)
    return edit, {"path": path, "old": edit["new"], "new": edit["old"]}


def _conflict(text: str, path: str, pattern: str, theirs: str) -> Candidate | None:
    """Merge-conflict markers around the line matching `pattern`: ours is the line as it is, theirs a variant."""
    match = re.search(pattern, text, re.M)
    if not match:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    end = len(text) if end < 0 else end + 1
    line = text[start:end]
    block = f"<<<<<<< HEAD\n{line}=======\n{match.expand(theirs)}\n>>>>>>> upgrade-build\n"
    edit = unique_edit(text, start, end, block, path)
    return Candidate("conflict-markers", f"{path}: around {line.strip()!r}", [edit],
                     [{"path": path, "old": edit["new"], "new": edit["old"]}])


def _python(tree: Path) -> list[Candidate]:
    out: list[Candidate] = []
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text(encoding="utf-8")
        match = re.search(r'^requires\s*=\s*\[\s*"(?P<name>[A-Za-z_]+)[^"]*"(?P<rest>[^\]]*)\]', text, re.M)
        if match and match.group("name") in ABSENT_PINS:
            name = match.group("name")
            for version in ABSENT_PINS[name]:
                pair = _line_edit(text, "pyproject.toml", r'^(requires\s*=\s*\[\s*)"' + name + r'[^"]*"',
                                  r'\1"' + name + "==" + version + '"')
                if pair:
                    out.append(Candidate("unresolvable-pin", f"pyproject.toml: {name}=={version}", [pair[0]],
                                         [pair[1]]))
            rest = match.group("rest").lstrip(", ")
            pair = _line_edit(text, "pyproject.toml", r'^(requires\s*=\s*\[)\s*"' + name + r'[^"]*"[, ]*',
                              r"\1")
            if pair:
                out.append(Candidate("missing-dependency", f"pyproject.toml: {name} dropped from the build "
                                                           f"requirements (left: [{rest}])", [pair[0]], [pair[1]]))
            conflict = _conflict(text, "pyproject.toml", r'^requires\s*=\s*\[.*\]\s*$',
                                 f'requires = ["{name}>=99"]')
            if conflict:
                out.append(conflict)
        pair = _line_edit(text, "pyproject.toml", r'^(requires-python\s*=\s*)"[^"]*"', r'\1">=3.14"')
        if pair:
            out.append(Candidate("toolchain-target", 'pyproject.toml: requires-python ">=3.14"', [pair[0]], [pair[1]]))
    for name, pattern, repl in (("setup.cfg", r"^(python_requires\s*=\s*).*$", r"\1>=3.14"),
                                ("setup.py", r"""(python_requires\s*=\s*)(['"])[^'"]*\2""", r"\1\2>=3.14\2")):
        file = tree / name
        if file.is_file():
            text = file.read_text(encoding="utf-8")
            pair = _line_edit(text, name, pattern, repl)
            if pair:
                out.append(Candidate("toolchain-target", f"{name}: python_requires >=3.14", [pair[0]], [pair[1]]))
            if name == "setup.py":
                conflict = _conflict(text, name, r"""^\s*version\s*=.*$""", "      version='9.9.9',")
                if conflict:
                    out.append(conflict)
    return out


def _go(tree: Path) -> list[Candidate]:
    out: list[Candidate] = []
    text = (tree / "go.mod").read_text(encoding="utf-8")
    for module, version in GO_ABSENT_MODULES:
        block = f"\nrequire {module} {version}\n"
        edit = {"path": "go.mod", "old": text, "new": text.rstrip("\n") + "\n" + block}
        out.append(Candidate("unresolvable-pin", f"go.mod: require {module} {version}", [edit],
                             [{"path": "go.mod", "old": edit["new"], "new": text}]))
    # A release form (1.N.P): a go command before 1.21 takes `go 1.30` as advisory and builds, but refuses this;
    # a newer one refuses a version past its own (GOTOOLCHAIN=local).
    pair = _line_edit(text, "go.mod", r"^go\s+1\.\d+(\.\d+)?\s*$", "go 1.30.1")
    if pair:
        out.append(Candidate("toolchain-target", "go.mod: go 1.30.1", [pair[0]], [pair[1]]))
    conflict = _conflict(text, "go.mod", r"^go\s+1\.\d+(\.\d+)?\s*$", "go 1.30")
    if conflict:
        out.append(conflict)
    for missing in ("../shared", "./internal/compat"):
        work = f"go 1.18\n\nuse (\n\t.\n\t{missing}\n)\n"
        out.append(Candidate("build-variable", f"go.work: uses the missing module {missing}",
                             [{"path": "go.work", "content": work}], [{"path": "go.work", "delete": True}]))
    return out


def _java(tree: Path) -> list[Candidate]:
    out: list[Candidate] = []
    text = (tree / "pom.xml").read_text(encoding="utf-8")
    deps = re.search(r"<dependencies>.*?</dependencies>", text[:text.find("<build>")] if "<build>" in text
                     else text, re.S)
    if deps:
        for block in re.finditer(r"[ \t]*<dependency>.*?</dependency>[ \t]*\n", deps.group(0), re.S):
            start, end = deps.start() + block.start(), deps.start() + block.end()
            artifact = re.search(r"<artifactId>([^<]+)</artifactId>", block.group(0))
            name = artifact.group(1) if artifact else "?"
            edit = unique_edit(text, start, end, "", "pom.xml")
            out.append(Candidate("missing-dependency", f"pom.xml: the {name} dependency removed", [edit],
                                 [{"path": "pom.xml", "old": edit["new"], "new": edit["old"]}]))
            version = re.search(r"<version>([^<$]+)</version>", block.group(0))
            if version:
                vs, ve = start + version.start(1), start + version.end(1)
                edit = unique_edit(text, vs, ve, version.group(1) + ".99", "pom.xml")
                out.append(Candidate("unresolvable-pin", f"pom.xml: {name} {version.group(1)}.99", [edit],
                                     [{"path": "pom.xml", "old": edit["new"], "new": edit["old"]}]))
    for release in ("21",):
        pair = _line_edit(text, "pom.xml", r"^(\s*)(<maven\.compiler\.source>[^<]*</maven\.compiler\.source>)",
                          r"\1\2\n\1<maven.compiler.release>" + release + "</maven.compiler.release>")
        if pair:
            out.append(Candidate("toolchain-target", f"pom.xml: maven.compiler.release {release}", [pair[0]],
                                 [pair[1]]))
        pair = _line_edit(text, "pom.xml", r"(<maven\.compiler\.target>)[^<]*(</maven\.compiler\.target>)",
                          r"\g<1>" + release + r"\g<2>")
        if pair:
            out.append(Candidate("toolchain-target", f"pom.xml: maven.compiler.target {release}", [pair[0]],
                                 [pair[1]]))
    conflict = _conflict(text, "pom.xml", r"^\s*<maven\.compiler\.source>[^<]*</maven\.compiler\.source>\s*$",
                         "    <maven.compiler.source>11</maven.compiler.source>")
    if conflict:
        out.append(conflict)
    if not (tree / ".mvn").exists():
        for settings in ("/opt/maven/settings-offline.xml", "/etc/maven/settings-ci.xml"):
            out.append(Candidate("build-variable", f".mvn/maven.config: --settings={settings} (missing)",
                                 [{"path": ".mvn/maven.config", "content": f"--settings={settings}\n"}],
                                 [{"path": ".mvn/maven.config", "delete": True}]))
    return out


def candidates(project: Project, tree: Path) -> list[Candidate]:
    """Every build-cause candidate of the project's build files, in a fixed order."""
    if project.language == "python":
        found = _python(tree)
    elif project.language == "go":
        found = _go(tree)
    else:
        found = _java(tree)
    return sorted(found, key=lambda c: (c.cause, c.detail))
