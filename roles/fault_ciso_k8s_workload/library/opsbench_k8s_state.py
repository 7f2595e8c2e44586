#!/usr/bin/python
"""Ansible module: add or replace objects in a recorded cluster state (a Kubernetes List JSON file)."""

DOCUMENTATION = r"""
module: opsbench_k8s_state
short_description: Apply objects to a recorded cluster state file, as kubectl apply would to a cluster
description:
  - Objects are matched by apiVersion group, kind, namespace and name; a match is replaced, others are appended.
  - Idempotent; reports changed only when the file's content changes.
options:
  path: {description: The cluster state file (a Kubernetes List)., type: path, required: true}
  objects: {description: The objects to apply., type: list, elements: dict, required: true}
"""

import json
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule


def key(obj):
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion", "")).split("/")[0] if "/" in str(obj.get("apiVersion", "")) else "",
            obj.get("kind"), meta.get("namespace", ""), meta.get("name"))


def merge(state, objects):
    """The List with each object replacing its match (same group, kind, namespace, name) or appended."""
    items = list(state["items"])
    for obj in objects:
        found = [i for i, have in enumerate(items) if key(have) == key(obj)]
        if found:
            items[found[0]] = obj
        else:
            items.append(obj)
    return {**state, "items": items}


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True},
                                          "objects": {"type": "list", "elements": "dict", "required": True}},
                           supports_check_mode=True)
    path = Path(module.params["path"])
    try:
        text = path.read_text()
        state = json.loads(text)
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot read the cluster state {path}: {exc}")
    if not isinstance(state, dict) or not isinstance(state.get("items"), list):
        module.fail_json(msg=f"{path} is not a Kubernetes List")
    merged = merge(state, module.params["objects"])
    new = json.dumps(merged, indent=1) + "\n"
    changed = new != text
    if changed and not module.check_mode:
        path.write_text(new)
    module.exit_json(changed=changed, objects=len(merged["items"]))


if __name__ == "__main__":
    main()
