#!/usr/bin/python
"""Ansible module: iptables rules in one run container's network namespace, tagged by a fault."""

DOCUMENTATION = r"""
module: opsbench_netfilter
short_description: Add or remove tagged iptables rules inside a run container's network namespace
description:
  - Enters the network namespace of the container of C(entity) (nsenter on its PID) and runs
    iptables there; the host's and other containers' rules are never touched.
  - C(state=present) inserts each rule of C(rules) with a comment C(tag), unless an identical
    tagged rule is already there (injecting twice is the same as once).
  - C(state=absent) deletes every rule carrying C(tag) in every table, whatever C(rules) says, so
    removal needs no saved state and is a no-op when nothing was added. A container restarted
    since has a fresh namespace without the rules, which is also fine.
  - Rules are inserted in order at the top of the chain; a container that is not running is
    reported (C(skipped)) and left alone.
options:
  run_dir:
    description: The run's directory (opsbench_run_dir).
    type: path
    required: true
  entity:
    description: Entity id of the container (e.g. cart-1).
    type: str
    required: true
  tag:
    description: Comment put on every rule, identifying the fault (e.g. opsbench:<run>:<fault name>).
    type: str
    required: true
  rules:
    description: Rules as lists of iptables arguments after the chain, each with C(table) and C(chain).
      For example C(table=filter), C(chain=INPUT), C(args=[-s, 10.89.0.5, -j, DROP]).
    type: list
    elements: dict
    default: []
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
"""

import shlex
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_podman import inspect, load_spec

TABLES = ("filter", "nat", "mangle", "raw")


def ipt(pid, *args):
    return subprocess.run(["nsenter", "--target", str(pid), "--net", "iptables", "-w", "5", *args],
                          capture_output=True, text=True, timeout=30)


def tagged_rules(pid, tag):
    """(table, rule tokens) of every rule in the namespace whose comment is tag, from iptables -S."""
    found = []
    for table in TABLES:
        proc = ipt(pid, "-t", table, "-S")
        if proc.returncode != 0:
            continue
        for line in proc.stdout.splitlines():
            tokens = shlex.split(line)
            if tokens[:1] == ["-A"] and any(t == "--comment" and tokens[i + 1:i + 2] == [tag]
                                            for i, t in enumerate(tokens)):
                found.append((table, tokens))
    return found


def main():
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "entity": {"type": "str", "required": True},
            "tag": {"type": "str", "required": True},
            "rules": {"type": "list", "elements": "dict", "default": []},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        },
    )
    p = module.params
    try:
        common = load_spec(p["run_dir"])["common"]
    except (OSError, ValueError, KeyError) as exc:
        module.fail_json(msg=f"cannot read the run's container specs under {p['run_dir']}: {exc}")
    name = f"{common['prefix']}-{p['entity']}"
    cur = inspect(name)
    if cur is None or not cur["running"] or not cur["pid"]:
        module.exit_json(changed=False, skipped=True, msg=f"{name} is not running")
    pid, changed, applied = cur["pid"], False, []
    if p["state"] == "absent":
        for table, tokens in tagged_rules(pid, p["tag"]):
            proc = ipt(pid, "-t", table, "-D", *tokens[1:])
            if proc.returncode != 0:
                module.fail_json(msg=f"{name}: cannot delete rule '{' '.join(tokens)}': {proc.stderr.strip()}")
            changed = True
            applied.append(" ".join([table, *tokens[1:]]))
        module.exit_json(changed=changed, removed=applied, pid=pid)
    for rule in reversed(p["rules"]):  # inserted at the top: reverse keeps the given order
        table, chain = rule.get("table", "filter"), rule["chain"]
        args = [str(a) for a in rule["args"]] + ["-m", "comment", "--comment", p["tag"]]
        if ipt(pid, "-t", table, "-C", chain, *args).returncode == 0:
            continue
        proc = ipt(pid, "-t", table, "-I", chain, *args)
        if proc.returncode != 0:
            module.fail_json(msg=f"{name}: iptables -t {table} -I {chain} {' '.join(args)} failed: "
                                 f"{proc.stderr.strip()}")
        changed = True
        applied.append(" ".join([table, chain, *args]))
    module.exit_json(changed=changed, added=applied, pid=pid)


if __name__ == "__main__":
    main()
