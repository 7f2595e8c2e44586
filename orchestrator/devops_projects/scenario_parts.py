"""Parts of a generated DevOps task's scenario that every family's writer shares (generate.py for build, issue and
test-generation instances, pipeline.py for chains of them): the fault types of the build causes, the manifestation
command that proves a fault's files are in place, and the workspace environment of one upstream project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.devops_projects import mutate
from orchestrator.devops_projects.run import language_meta
from orchestrator.devops_projects.tasks import Instance

BUILD_FAULT_TYPES = {"unresolvable-pin": "dependency_unresolvable", "missing-dependency": "missing_dependency",
                     "conflict-markers": "broken_build_file", "toolchain-target": "toolchain_mismatch",
                     "build-variable": "wrong_build_env"}


def manifest_command(edits: list[dict[str, Any]], pristine: Path | None) -> str:
    """A shell command that succeeds when every file the fault edits holds exactly the faulty bytes (sha256), or
    is absent when the fault deletes it."""
    import hashlib
    import shlex

    after: dict[str, str | None] = {}
    for edit in edits:
        rel = edit["path"]
        if edit.get("delete"):
            after[rel] = None
        elif "content" in edit:
            after[rel] = edit["content"]
        else:
            if rel not in after:
                after[rel] = (pristine / rel).read_text(encoding="utf-8") if pristine else ""
            after[rel] = mutate.apply_edit(after[rel] or "", edit)
    parts = []
    for rel, text in sorted(after.items()):
        if text is None:
            parts.append(f"test ! -e {shlex.quote(rel)}")
        else:
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            parts.append(f"echo {shlex.quote(f'{digest}  {rel}')} | sha256sum -c --status")
    return " && ".join(parts)


def environment_of(inst: Instance) -> dict[str, Any]:
    """The workspace with the instance's upstream project alone (env_workspace `upstream`: copied at its pinned
    version from the cache, checked as its contract says, the pristine test count the evaluation expects)."""
    # A test-generation task whose reference is a hidden test of the project's own expects more tests than the
    # workspace's thinned suite, not the pristine one.
    tests = int(inst.provenance.get("workspace_tests", inst.provenance.get("pristine_tests", 0)))
    return {"backend": "local", "application": "workspace",
            "args": {"projects": [], "upstream": [{"id": inst.project, **language_meta(inst.language, tests)}]}}
