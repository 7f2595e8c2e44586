#!/usr/bin/python
"""Ansible module: append one entry to an environment's change journal (module_utils/opsbench_changes)."""

DOCUMENTATION = r"""
module: opsbench_change
short_description: Record a deploy, release or configuration change in the environment's change journal
description:
  - Appends one JSON line (id, time, service, kind, summary, source, details) to C(path), which the
    tool gateway's get_recent_changes serves. Always reports C(changed) (a journal entry is a change).
options:
  path:
    description: The journal (env/changes.jsonl of the run).
    type: path
    required: true
  service:
    description: The service or config entity that changed.
    type: str
    required: true
  kind:
    description: What kind of change.
    type: str
    choices: [deploy, release, rollback, flag, config]
    required: true
  summary:
    description: One line, as the pipeline or console would log it.
    type: str
    required: true
  key:
    description: What in the service changed (an asset, a flag), part of the entry's id.
    type: str
  details:
    description: Structured details (files, versions, values).
    type: dict
  source:
    description: Who made the change (a pipeline, a console).
    type: str
  time:
    description: When (Unix time); default now.
    type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_changes import append_change


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "service": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True, "choices": ["deploy", "release", "rollback", "flag", "config"]},
            "summary": {"type": "str", "required": True},
            "key": {"type": "str"},
            "details": {"type": "dict"},
            "source": {"type": "str"},
            "time": {"type": "float"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=True)
    try:
        entry = append_change(p["path"], p["service"], p["kind"], p["summary"], key=p["key"], details=p["details"],
                              source=p["source"], when=p["time"])
    except OSError as exc:
        module.fail_json(msg=f"cannot append to the change journal {p['path']}: {exc}")
    module.exit_json(changed=True, entry=entry)


if __name__ == "__main__":
    main()
