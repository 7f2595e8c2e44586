#!/usr/bin/python
"""Ansible module: the objects of a recorded cluster state (a Kubernetes List JSON file) as Kind/namespace/name."""

DOCUMENTATION = r"""
module: opsbench_k8s_keys
short_description: List the objects of a recorded cluster state and its sha256
options:
  path: {description: The cluster state file (a Kubernetes List)., type: path, required: true}
"""

import hashlib
import json
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    path = Path(module.params["path"])
    try:
        raw = path.read_bytes()
        items = json.loads(raw)["items"]
        keys = [f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in items]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg=f"cannot read the cluster state {path}: {exc}")
    module.exit_json(changed=False, objects=keys, sha256=hashlib.sha256(raw).hexdigest())


if __name__ == "__main__":
    main()
