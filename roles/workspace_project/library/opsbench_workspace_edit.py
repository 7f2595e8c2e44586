#!/usr/bin/python
"""Ansible module: apply or revert edits to a project of the run's workspace (fault injection, reference solutions)."""

DOCUMENTATION = r"""
module: opsbench_workspace_edit
short_description: Apply or revert exact edits to a workspace project, optionally folded into its baseline commit
description:
  - Edits are exact-text replacements (path, old, new), whole files (path, content) or deletions (path, delete).
    Applying an edit already applied is a no-op, so injecting twice equals once.
  - With fold, the project's working tree is first reset to its baseline (whatever was done to it is discarded),
    and afterwards the change is folded into the baseline commit (same author, fixed dates, the tag moved, the
    reflog expired and unreachable objects pruned): the history shows no trace of the edit, and reverting every
    edit gives back the very commit the deploy made.
  - Files are written on the host side of the workspace bind mount and owned by the workspace user; git runs
    inside the workspace container as that user.
options:
  environment: {description: The run's environment.json (its workspace section)., type: path, required: true}
  project: {description: The project (a directory of the workspace)., type: str, required: true}
  edits: {description: The edits., type: list, elements: dict, required: true}
  action: {description: apply or revert., type: str, choices: [apply, revert], default: apply}
  fold: {description: Reset to the baseline first and fold the change into the baseline commit., type: bool, default: false}
  state_file: {description: Where the originals of every edited file are saved (apply) and read (revert)., type: path}
  baseline_tag: {description: The tag of the baseline commit., type: str, default: opsbench-baseline}
"""

import json
import os
import subprocess
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule

GIT_IDENTITY = ["-c", "user.name=OpsBench", "-c", "user.email=opsbench@localhost", "-c", "init.defaultBranch=main"]
GIT_DATES = ["--env=GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "--env=GIT_COMMITTER_DATE=2026-01-01T00:00:00Z"]


class EditError(Exception):
    pass


def _inside(root, rel):
    """The host path of `rel` under `root`, refusing absolute paths, `..` and symlinks that lead out."""
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        raise EditError(f"edit path {rel!r} must be relative to the project, without '..'")
    path = root / rel
    real = Path(os.path.realpath(path))
    if real != root and root not in real.parents:
        raise EditError(f"edit path {rel!r} leads outside the project (to {real})")
    return path


def _write(path, text, uid):
    parent = path.parent
    missing = []
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    for d in missing:
        os.chown(d, uid, uid)
    path.write_text(text)
    os.chown(path, uid, uid)


def _replace(path, rel, index, old, new, uid):
    """Replace the one occurrence of `old`; a no-op when only `new` is there (already applied)."""
    if not path.is_file():
        raise EditError(f"edit {index} ({rel}): the file does not exist")
    text = path.read_text()
    count = text.count(old)
    if count == 1:
        _write(path, text.replace(old, new, 1), uid)
        return True
    if count == 0 and new and text.count(new) >= 1:
        return False
    raise EditError(f"edit {index} ({rel}): the text to replace occurs {count} times, expected once: {old[:80]!r}")


def apply_edits(root, edits, uid, originals):
    changed = False
    for index, edit in enumerate(edits, 1):
        rel = edit.get("path", "")
        path = _inside(root, rel)
        if "old" in edit:
            # The whole file is kept too: an edit whose new text is not unique (a test function replaced by a blank
            # line) cannot be reverted by replacing it back.
            if rel not in originals and path.is_file():
                originals[rel] = path.read_text()
            changed |= _replace(path, rel, index, edit["old"], edit.get("new", ""), uid)
        elif "content" in edit:
            if rel not in originals:
                originals[rel] = path.read_text() if path.is_file() else None
            if not path.is_file() or path.read_text() != edit["content"]:
                _write(path, edit["content"], uid)
                changed = True
        elif edit.get("delete"):
            if rel not in originals:
                originals[rel] = path.read_text() if path.is_file() else None
            if path.exists():
                path.unlink()
                changed = True
        else:
            raise EditError(f"edit {index} ({rel}): give old and new, content, or delete: true")
    return changed


def revert_edits(root, edits, uid, originals):
    changed = False
    for index, edit in reversed(list(enumerate(edits, 1))):
        rel = edit.get("path", "")
        path = _inside(root, rel)
        if "old" in edit and rel not in originals:
            if path.is_file():
                changed |= _replace(path, rel, index, edit.get("new", ""), edit["old"], uid)
        elif rel in originals:
            original = originals[rel]
            if original is None:
                if path.exists():
                    path.unlink()
                    changed = True
            elif not path.is_file() or path.read_text() != original:
                _write(path, original, uid)
                changed = True
    return changed


def git(module, ws, project, script):
    argv = ["podman", "exec", f"--user={ws['uid']}:{ws['gid']}", *GIT_DATES,
            f"--workdir={ws['root']}/{project}", ws["container"], "sh", "-c", script]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise EditError(f"git in {ws['container']}:{ws['root']}/{project} failed (rc {rc}): {(err or out).strip()[:500]}")
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "environment": {"type": "path", "required": True},
            "project": {"type": "str", "required": True},
            "edits": {"type": "list", "elements": "dict", "required": True},
            "action": {"type": "str", "choices": ["apply", "revert"], "default": "apply"},
            "fold": {"type": "bool", "default": False},
            "state_file": {"type": "path"},
            "baseline_tag": {"type": "str", "default": "opsbench-baseline"},
        },
        supports_check_mode=False,
    )
    p = module.params
    try:
        ws = json.loads(Path(p["environment"]).read_text())["workspace"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg=f"{p['environment']}: no workspace section ({exc}); is the environment env_workspace?")
    project = p["project"]
    if project not in ws.get("projects", []):
        module.fail_json(msg=f"project {project!r} is not in the workspace; its projects are {ws.get('projects')}")
    root = Path(ws["tree"]) / project
    uid = int(ws["uid"])
    tag = p["baseline_tag"]
    state_file = Path(p["state_file"]) if p["state_file"] else None
    saved = json.loads(state_file.read_text()) if state_file and state_file.is_file() else None
    ident = " ".join(GIT_IDENTITY)
    try:
        if p["fold"]:
            # Whatever was done to the project (an agent's changes, commits, branches) goes: back to the baseline.
            git(module, ws, project, f"git {ident} checkout -q -f -B main {tag} && git clean -qfdx")
        if p["action"] == "apply":
            originals = dict(saved["originals"]) if saved else {}
            changed = apply_edits(root, p["edits"], uid, originals)
            if state_file:
                state_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                state_file.write_text(json.dumps({"project": project, "originals": originals}, indent=2))
        else:
            if state_file and saved is None:
                module.exit_json(changed=False, msg="never applied: nothing to revert")
            changed = revert_edits(root, p["edits"], uid, saved["originals"] if saved else {})
        if p["fold"]:
            out = git(module, ws, project,
                      f"git add -A && if git diff --cached --quiet; then echo same; else "
                      f"git {ident} commit -q --amend --no-edit --allow-empty && echo folded; fi && "
                      f"git tag -f {tag} >/dev/null && git reflog expire --expire=now --all && git gc -q --prune=now")
            changed = changed or "folded" in out
        if p["action"] == "revert" and state_file and state_file.exists():
            state_file.unlink()
            changed = True
    except (EditError, OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"{p['action']} edits to workspace project {project}: {exc}")
    module.exit_json(changed=changed)


if __name__ == "__main__":
    main()
