#!/usr/bin/python
"""Ansible module: switch one feature flag of a flagd-format flags file, or restore its entry."""

DOCUMENTATION = r"""
module: opsbench_flag
short_description: Switch a feature flag on (optionally with a value) or restore its saved entry
description:
  - C(state=on) sets the flag's C(defaultVariant) to C(on), and its C(on) variant to C(value) when
    given. Returns the entry as it was before in C(previous), so the caller can save it.
  - C(state=restored) writes C(saved) back as the flag's entry (the value returned as C(previous)
    at injection).
  - The file is replaced atomically (write, then rename in the same directory), so services that
    read it at any moment see either the old or the new flags.
options:
  path:
    description: The flags file.
    type: path
    required: true
  name:
    description: Flag name.
    type: str
    required: true
  state:
    description: C(on) or C(restored).
    type: str
    choices: ["on", restored]
    default: "on"
  value:
    description: Value of the C(on) variant (any JSON value); omitted keeps the current one.
    type: raw
  saved:
    description: The entry to restore (C(state=restored)).
    type: dict
  journal:
    description: >-
      The environment's change journal; when the flag changes, an entry (service C(flags), kind C(flag))
      records it as the feature-flag console would.
    type: path
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_changes import append_change


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "default": "on", "choices": ["on", "restored"]},
            "value": {"type": "raw"},
            "saved": {"type": "dict"},
            "journal": {"type": "path"},
        },
        required_if=[("state", "restored", ["saved"])],
    )
    p = module.params
    try:
        with open(p["path"]) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot read flags file {p['path']}: {exc}")
    flags = doc.setdefault("flags", {})
    if p["name"] not in flags and p["state"] == "on":
        module.fail_json(msg=f"flag '{p['name']}' is not defined in {p['path']} (known: {', '.join(sorted(flags))})")
    previous = flags.get(p["name"])
    if p["state"] == "on":
        entry = json.loads(json.dumps(previous))
        entry["state"] = "ENABLED"
        entry["defaultVariant"] = "on"
        if p["value"] is not None:
            entry.setdefault("variants", {})["on"] = p["value"]
    else:
        entry = p["saved"]
    changed = entry != previous
    if changed and not module.check_mode:
        flags[p["name"]] = entry
        directory = os.path.dirname(p["path"]) or "."
        fd, tmp = tempfile.mkstemp(prefix=".flags-", dir=directory)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p["path"])
        if p["journal"]:
            variant = entry.get("defaultVariant") if isinstance(entry, dict) else None
            value = (entry.get("variants") or {}).get(variant) if isinstance(entry, dict) else None
            append_change(p["journal"], "flags", "flag", f"feature flag {p['name']}: default variant {variant!r} "
                          f"(value {json.dumps(value)})", key=p["name"], source="feature-flag console",
                          details={"flag": p["name"], "variant": variant, "value": value})
    module.exit_json(changed=changed, previous=previous, current=entry)


if __name__ == "__main__":
    main()
