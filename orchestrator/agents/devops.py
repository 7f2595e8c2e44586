"""Scripted DevOps baseline agent: fixes a broken build from its error messages, through the terminal tools only.

For a ``fix`` task it runs the project's gate (``make -s check``) in the workspace, matches the failure against a
rulebook of build and configuration remedies (an artifact or wheel pinned to a version the offline repository
lacks, a dependency the code needs but the build does not declare, merge-conflict markers, a toolchain target newer
than the installed one, a renamed Go module, a build environment variable naming a path that does not exist),
applies the first remedy that matches by editing files with ``read_file``/``write_file``, and runs the gate again, a
few rounds at most. Each remedy reads what the workspace holds (the Maven repository, the wheel cache, the installed
JDK and Go) rather than knowing the answer. It cannot fix a bug in the code or write a test that catches one (issue
resolving, test generation): there it reports that no remedy applies. A ``diagnose`` task (monitoring) is handed
to ``orchestrator.agents.devops_monitor``.

Run: ``opsbench run devops-build-junit-unresolvable --agent "python -m orchestrator.agents.devops"``.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.agents.gateway_client import Call, GatewayClient, ToolError, open_session

GATE = "make -s check"
ROUNDS = 6
GATE_TIMEOUT = 600


@dataclass
class Workspace:
    """The agent's view of one project through the gateway, and what it changed."""

    call: Call
    project: str
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    top: set[str] | None = None  # the project's top-level names, listed once

    def has(self, rel: str) -> bool:
        """Whether the project has `rel` (its first component is listed once, so rules for another language's
        build files cost no calls)."""
        if self.top is None:
            listing = self.call("list_files", path=self.project, limit=1000)
            self.top = {str(e["path"]).rsplit("/", 1)[-1] for e in listing.get("items", [])}
        return rel.split("/", 1)[0] in self.top

    def sh(self, command: str, timeout: int = 60) -> dict[str, Any]:
        result: dict[str, Any] = self.call("exec", command=command, cwd=self.project, timeout=timeout,
                                           max_output_bytes=262144)
        return result

    def read(self, rel: str) -> str | None:
        if not self.has(rel):
            return None
        try:
            return str(self.call("read_file", path=f"{self.project}/{rel}", limit=100000)["content"])
        except (ToolError, KeyError, TypeError):
            return None

    def write(self, rel: str, text: str, why: str) -> None:
        self.call("write_file", path=f"{self.project}/{rel}", content=text)
        if rel not in self.changed:
            self.changed.append(rel)
        self.notes.append(f"{rel}: {why}")


Remedy = Callable[[Workspace, str], bool]


def _versions(text: str) -> list[str]:
    """Version-like names of a listing, highest first."""
    found = [v for v in text.split() if re.fullmatch(r"\d+(\.\d+)*([.-][\w.]+)?", v)]
    return sorted(found, key=lambda v: [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", v)], reverse=True)


# -- Maven -------------------------------------------------------------------------------------------------------
def _maven_repo(ws: Workspace) -> str:
    out = ws.sh("sed -n 's:.*<localRepository>\\(.*\\)</localRepository>.*:\\1:p' /etc/maven/settings-debian.xml "
                "2>/dev/null | head -1")
    return str(out["stdout"]).strip() or "/usr/share/maven-repo"


def _set_pom_version(ws: Workspace, artifact: str, version: str, why: str) -> bool:
    pom = ws.read("pom.xml")
    if pom is None:
        return False
    block = re.search(rf"<artifactId>{re.escape(artifact)}</artifactId>\s*<version>([^<]+)</version>", pom)
    if not block:
        return False
    current = block.group(1)
    prop = re.fullmatch(r"\$\{([\w.-]+)\}", current)
    if prop:
        new = re.sub(rf"<{re.escape(prop.group(1))}>[^<]*</", f"<{prop.group(1)}>{version}</", pom, count=1)
    else:
        new = pom[:block.start(1)] + version + pom[block.end(1):]
    if new == pom:
        return False
    ws.write("pom.xml", new, why)
    return True


def maven_unresolvable(ws: Workspace, log: str) -> bool:
    """An artifact pinned to a version the offline repository lacks: pin the highest version it has."""
    if "resolve" not in log and "offline" not in log:
        return False
    m = re.search(r"artifacts? (?:could not be resolved: )?([\w.-]+):([\w.-]+):(?:jar|pom):([\w.-]+)", log)
    if not m:
        return False
    group, artifact, version = m.groups()
    listing = ws.sh(f"ls {shlex.quote(_maven_repo(ws) + '/' + group.replace('.', '/') + '/' + artifact)}")
    available = [v for v in _versions(str(listing["stdout"])) if v != version]
    if not available:
        return False
    return _set_pom_version(ws, artifact, available[0],
                            f"{group}:{artifact}:{version} is not in the offline repository, pinned {available[0]}")


def maven_missing_package(ws: Workspace, log: str) -> bool:
    """Code imports a package no declared dependency provides: declare the artifact of the repository holding it."""
    m = re.search(r"package ([\w.]+) does not exist", log)
    pom = ws.read("pom.xml")
    if not m or pom is None:
        return False
    path = m.group(1).replace(".", "/") + "/"
    finder = (
        "import pathlib, sys, zipfile\n"
        f"want = {path!r}\n"
        "hits = []\n"
        f"for jar in sorted(pathlib.Path({_maven_repo(ws)!r}).rglob('*.jar')):\n"
        "    try:\n"
        "        names = zipfile.ZipFile(jar).namelist()\n"
        "    except Exception:\n"
        "        continue\n"
        "    if any(n.startswith(want) for n in names):\n"
        "        hits.append(jar)\n"
        "for jar in sorted(hits, key=lambda j: len(j.parts)):\n"
        "    print(jar.parent.parent.relative_to(" + repr(_maven_repo(ws)) + "), jar.parent.name)\n")
    out = ws.sh(f"python3 -c {shlex.quote(finder)}", timeout=120)
    rows = [line.split() for line in str(out["stdout"]).splitlines() if len(line.split()) == 2]
    rows = [r for r in rows if r[1] != "debian"] or rows
    if not rows:
        return False
    coords, version = rows[0]
    group, artifact = coords.rsplit("/", 1)[0].replace("/", "."), coords.rsplit("/", 1)[1]
    scope = "\n      <scope>test</scope>" if "testCompile" in log or "src/test" in log else ""
    dep = (f"    <dependency>\n      <groupId>{group}</groupId>\n      <artifactId>{artifact}</artifactId>\n"
           f"      <version>{version}</version>{scope}\n    </dependency>\n")
    if "<dependencies>" in pom:
        new = pom.replace("<dependencies>\n", "<dependencies>\n" + dep, 1)
    else:
        new = pom.replace("  <build>", f"  <dependencies>\n{dep}  </dependencies>\n\n  <build>", 1)
    if new == pom:
        return False
    ws.write("pom.xml", new, f"package {m.group(1)} is provided by {group}:{artifact}:{version}, declared it")
    return True


def maven_release(ws: Workspace, log: str) -> bool:
    """The compiler targets a newer Java release than the JDK: target the JDK's own release."""
    m = re.search(r"(?:release version|invalid target release:?) (\d+)", log)
    pom = ws.read("pom.xml")
    if not m or pom is None:
        return False
    out = ws.sh("javac -version 2>&1")
    jdk = re.search(r"javac (\d+)", str(out["stdout"]) + str(out["stderr"]))
    if not jdk:
        return False
    new = re.sub(rf"(<maven\.compiler\.(?:release|source|target)>){m.group(1)}(</)", rf"\g<1>{jdk.group(1)}\2", pom)
    if new == pom:
        return False
    ws.write("pom.xml", new, f"Java release {m.group(1)} is not supported by the installed JDK {jdk.group(1)}")
    return True


# -- any build -----------------------------------------------------------------------------------------------------
def conflict_markers(ws: Workspace, log: str) -> bool:
    """Files with merge-conflict markers: keep our side (HEAD) of each conflict."""
    out = ws.sh("grep -rlE '^(<<<<<<<|>>>>>>>) ' --exclude-dir=.git . 2>/dev/null")
    files = [f.removeprefix("./") for f in str(out["stdout"]).split()]
    fixed = False
    for rel in files:
        text = ws.read(rel)
        if text is None:
            continue
        resolved = re.sub(r"^<<<<<<< [^\n]*\n(.*?)^=======\n.*?^>>>>>>> [^\n]*\n", r"\1", text, flags=re.S | re.M)
        if resolved != text:
            ws.write(rel, resolved, "resolved leftover merge-conflict markers (kept HEAD's side)")
            fixed = True
    return fixed


def env_missing_path(ws: Workspace, log: str) -> bool:
    """build.env sets a variable to a path that does not exist: point it at what is installed, or drop it."""
    text = ws.read("build.env")
    if text is None:
        return False
    lines = text.splitlines(keepends=True)
    changed = False
    for i, line in enumerate(lines):
        m = re.match(r"\s*([A-Z_][A-Z0-9_]*)=(/\S*)", line)
        if not m or ws.sh(f"test -e {shlex.quote(m.group(2))}")["exit_code"] == 0:
            continue
        key = m.group(1)
        replacement = None
        if key == "JAVA_HOME":
            found = ws.sh("for d in /usr/lib/jvm/default-java /usr/lib/jvm/*; do [ -x \"$d/bin/javac\" ] && "
                          "{ echo \"$d\"; break; }; done")
            replacement = str(found["stdout"]).strip() or None
        lines[i] = f"{key}={replacement}\n" if replacement else ""
        ws.notes.append(f"build.env: {key}={m.group(2)} does not exist, "
                        + (f"set it to {replacement}" if replacement else "removed it (the tools' default is right)"))
        changed = True
    if changed:
        ws.write("build.env", "".join(lines), "a build variable named a missing path")
    return changed


# -- Go --------------------------------------------------------------------------------------------------------------
def go_toolchain(ws: Workspace, log: str) -> bool:
    """go.mod written for a newer Go (a newer `go` line, a `toolchain` directive): target the installed Go."""
    if not re.search(r"go\.mod.*(unknown directive: toolchain|invalid go version|requires go)", log):
        return False
    gomod = ws.read("go.mod")
    out = ws.sh("go env GOVERSION")
    have = re.match(r"go(\d+\.\d+)", str(out["stdout"]).strip())
    if gomod is None or not have:
        return False
    new = re.sub(r"^go \S+$", f"go {have.group(1)}", gomod, flags=re.M)
    new = re.sub(r"^toolchain \S+\n", "", new, flags=re.M)
    new = re.sub(r"\n{3,}", "\n\n", new).rstrip("\n") + "\n"
    if new == gomod:
        return False
    ws.write("go.mod", new, f"go.mod asked for a newer Go than the installed go{have.group(1)}")
    return True


def go_module_path(ws: Workspace, log: str) -> bool:
    """The code imports its own packages under a module path go.mod no longer declares (a renamed module): declare
    the path the code uses again (the tests import it too, and they are not to be changed)."""
    m = re.search(r"(?:cannot find module providing package|no required module provides package) ([\w./-]+)"
                  r"|package ([\w./-]+) is not in (?:GOROOT|std)", log)
    gomod = ws.read("go.mod")
    declared = re.search(r"^module (\S+)", gomod or "", flags=re.M)
    if not m or gomod is None or not declared:
        return False
    wanted, name = (m.group(1) or m.group(2)).split("/"), declared.group(1).rsplit("/", 1)[-1]
    while wanted and wanted[-1] != name:  # a subpackage of the module: its path ends below the module's
        wanted.pop()
    if not wanted or "/".join(wanted) == declared.group(1):
        return False
    ws.write("go.mod", gomod.replace(f"module {declared.group(1)}", f"module {'/'.join(wanted)}", 1),
             f"the code imports its packages as {'/'.join(wanted)}, go.mod declared {declared.group(1)}")
    return True


# -- Python -----------------------------------------------------------------------------------------------------------
def _wheels(ws: Workspace, log: str = "") -> list[str]:
    """The wheels in the caches pip looks in: its configured find-links and those the failing pip names ("Looking in
    links: ..."; an upstream project's contract passes its own `--find-links`), else /opt/wheels."""
    out = ws.sh("pip3 config list 2>/dev/null; ls /opt/wheels 2>/dev/null")
    links = re.findall(r"find-links='([^']+)'", str(out["stdout"]))
    for named in re.findall(r"Looking in links: ([^\n]+)", log):
        links += [x.strip() for x in named.split(",") if x.strip().startswith("/")]
    where = " ".join(shlex.quote(x) for x in dict.fromkeys(links)) or "/opt/wheels"
    listing = ws.sh(f"ls {where} 2>/dev/null")
    return str(listing["stdout"]).split()


def _wheel_version(name: str, wheels: list[str]) -> str | None:
    canon = re.sub(r"[-_.]+", "_", name).lower()
    versions = [w.split("-")[1] for w in wheels if w.endswith(".whl") and w.split("-")[0].lower() == canon]
    return _versions(" ".join(versions))[0] if versions else None


def pip_unresolvable(ws: Workspace, log: str) -> bool:
    """A requirement pinned to a version the wheel cache lacks: pin the version it has."""
    m = re.search(r"No matching distribution found for ([A-Za-z0-9_.-]+)\s*([=<>!~]=?[^\s;]+)?", log)
    pyproject = ws.read("pyproject.toml")
    if not m or pyproject is None:
        return False
    name = m.group(1)
    have = _wheel_version(name, _wheels(ws, log))
    if have is None:
        return False
    new = re.sub(rf'"{re.escape(name)}\s*[=<>!~]=?[^"]*"', f'"{name}=={have}"', pyproject, flags=re.I)
    if new == pyproject:
        return False
    ws.write("pyproject.toml", new, f"{name}{m.group(2) or ''} is not in the wheel cache, pinned {have}")
    return True


def python_missing_module(ws: Workspace, log: str) -> bool:
    """Code imports a module no declared dependency provides: declare the cached wheel that provides it."""
    m = re.search(r"No module named '([\w]+)", log)
    pyproject = ws.read("pyproject.toml")
    if not m or pyproject is None:
        return False
    module = m.group(1)
    finder = ("import glob, sys, zipfile\n"
              "for w in sorted(glob.glob('/opt/wheels/*.whl')):\n"
              "    names = zipfile.ZipFile(w).namelist()\n"
              f"    if any(n.split('/')[0] in ({module!r}, {module + '.py'!r}) for n in names):\n"
              "        print(w.rsplit('/', 1)[1].split('-')[0].replace('_', '-'), w.rsplit('/', 1)[1].split('-')[1])\n")
    out = ws.sh(f"python3 -c {shlex.quote(finder)}")
    rows = [line.split() for line in str(out["stdout"]).splitlines() if len(line.split()) == 2]
    deps = re.search(r"^dependencies = \[(.*?)\]", pyproject, flags=re.M | re.S)
    if not rows or not deps:
        return False
    dist, version = rows[0]
    items = [x for x in re.findall(r'"([^"]+)"', deps.group(1))] + [f"{dist}>={version}"]
    new = pyproject[:deps.start()] + "dependencies = [" + ", ".join(f'"{x}"' for x in items) + "]" \
        + pyproject[deps.end():]
    ws.write("pyproject.toml", new, f"module {module} comes from {dist}, which was not declared")
    return True


def python_requires(ws: Workspace, log: str) -> bool:
    """requires-python excludes the installed Python: require the installed minor version."""
    m = re.search(r"requires a different Python: (\d+)\.(\d+)\.\d+ not in '([^']+)'", log)
    pyproject = ws.read("pyproject.toml")
    if not m or pyproject is None:
        return False
    new = re.sub(r'^requires-python = "[^"]*"', f'requires-python = ">={m.group(1)}.{m.group(2)}"', pyproject,
                 flags=re.M)
    if new == pyproject:
        return False
    ws.write("pyproject.toml", new, f"requires-python {m.group(3)} excluded the installed Python {m.group(1)}."
             f"{m.group(2)}")
    return True


RULEBOOK: tuple[Remedy, ...] = (conflict_markers, env_missing_path, maven_unresolvable, maven_missing_package,
                                maven_release, go_toolchain, go_module_path, pip_unresolvable, python_missing_module,
                                python_requires)


def gate_of(goal: str) -> str:
    """The gate the task names (the first quoted `make ... check` of its goal: an upstream project's check contract is
    `make -s -f opsbench.mk check`), else the written projects' `make -s check`."""
    m = re.search(r"`(make\b[^`\n]*\bcheck)`", goal)
    return m.group(1) if m else GATE


def fix(call: Call, project: str, gate_command: str = GATE) -> dict[str, Any]:
    """Run the gate, apply the first remedy that matches its failure, again, up to ROUNDS times."""
    ws = Workspace(call, project)
    passed = False
    for _ in range(ROUNDS):
        gate = ws.sh(gate_command, timeout=GATE_TIMEOUT)
        if gate["exit_code"] == 0:
            passed = True
            break
        log = f"{gate['stdout']}\n{gate['stderr']}"
        if not any(remedy(ws, log) for remedy in RULEBOOK):
            ws.notes.append("no remedy of the rulebook matches the failure: " + log.strip()[-300:])
            break
    if passed and not ws.changed:
        summary = f"`{gate_command}` passes in {project}; nothing in the build or its configuration needed a change."
    elif passed:
        summary = f"`{gate_command}` passes in {project} again: " + "; ".join(ws.notes)
    else:
        summary = f"`{gate_command}` still fails in {project}: " + "; ".join(ws.notes)
    return {"schema": "opsbench/fix/v1", "summary": summary,
            "changed_files": [f"{project}/{f}" for f in ws.changed], "commands": [f"cd {project} && {gate_command}"]}


def project_of(goal: str, projects: list[str]) -> str | None:
    m = re.search(r"/workspace/([\w.-]+)", goal)
    if m:
        return m.group(1)
    return next((p for p in projects if re.search(rf"\b{re.escape(p)}\b", goal)), None)


def run(manifest: dict[str, Any], call: Call) -> dict[str, Any] | None:
    kinds = [t["kind"] for t in manifest["tasks"]]
    if "diagnose" in kinds:
        from orchestrator.agents import devops_monitor  # the monitoring family's scripted agent
        diagnosis: dict[str, Any] = devops_monitor.run(call)
        return diagnosis
    listing = call("list_files", path=".", limit=1000)
    projects = [str(e["path"]).rsplit("/", 1)[-1] for e in listing.get("items", []) if e.get("type") == "dir"]
    report: dict[str, Any] | None = None
    for task in manifest["tasks"]:
        if task["kind"] != "fix":
            continue  # a test that catches a bug needs the bug understood: not a scripted method
        project = project_of(task["goal"], projects)
        if project is None:
            continue
        done = fix(call, project, gate_of(task["goal"]))
        if report is None:
            report = done
        else:
            report["summary"] += " " + done["summary"]
            report["changed_files"] = list(dict.fromkeys(report["changed_files"] + done["changed_files"]))
            report["commands"] = list(dict.fromkeys(report["commands"] + done["commands"]))
    return report


def main() -> int:
    session = open_session()
    output = run(session.manifest, GatewayClient(session.url, session.token))
    if output is not None:
        session.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
