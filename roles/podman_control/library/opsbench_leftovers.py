#!/usr/bin/python
"""Ansible module: what a run's container environment still carries from faults (changes nothing)."""

DOCUMENTATION = r"""
module: opsbench_leftovers
short_description: List what differs from the deployed state of a run's containers
description:
  - Compares the live containers of the run in C(run_dir) with the specs its deploy recorded
    (run_dir/env/containers.json) and reports, as C(leftovers), every difference a fault could
    leave behind. An empty list means the environment is back at its deployed state.
  - Checked are containers missing, not running, paused, or carrying a fault's overrides; helper
    containers of faults (label opsbench.fault); iptables rules tagged by a fault in any
    container's network namespace; CPU quotas set on containers deployed without one; fault state
    still saved under run_dir/state/faults; a flags file that differs from the deployed one
    (run_dir/env/flags.deployed.json, when the environment keeps one).
options:
  run_dir:
    description: The run's directory (opsbench_run_dir).
    type: path
    required: true
  flags_file:
    description: The live feature-flags file, compared with run_dir/env/flags.deployed.json.
    type: path
  static_dir:
    description: Files a service serves as deployed (the shop's browser assets), compared with C(static_source).
    type: path
  static_source:
    description: Where C(static_dir) was deployed from.
    type: path
"""

import filecmp
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_podman import OVERRIDES_LABEL, inspect, load_spec, podman

FAULT_TAG = "opsbench-fault:"


def cpu_quota(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(","):
                    with open(f"/sys/fs/cgroup/cpu{path}/cpu.cfs_quota_us") as q:
                        return int(q.read().strip())
    except (OSError, ValueError):
        return None
    return None


def fault_rules(pid):
    found = []
    for table in ("filter", "nat"):
        proc = subprocess.run(["nsenter", "--target", str(pid), "--net", "iptables", "-w", "5", "-t", table, "-S"],
                              capture_output=True, text=True, timeout=30)
        found += [f"{table}: {line}" for line in proc.stdout.splitlines() if FAULT_TAG in line]
    return found


def container_leftovers(prefix, cid, c):
    cur = inspect(f"{prefix}-{cid}")
    if cur is None:
        return [f"container {cid} is missing"]
    out = []
    if cur["overrides"]:
        out.append(f"container {cid} still runs with a fault's changes {json.dumps(cur['overrides'])}")
    if cur["paused"]:
        out.append(f"container {cid} is paused")
    elif not cur["running"]:
        return [*out, f"container {cid} is not running ({cur['status']})"]
    quota = cpu_quota(cur["pid"]) if cur["pid"] else None
    if not c.get("cpus") and quota not in (-1, None):
        out.append(f"container {cid} has a CPU quota ({quota} us per period)")
    if cur["pid"]:
        out += [f"container {cid} has a fault's iptables rule: {r}" for r in fault_rules(cur["pid"])]
    return out


def static_leftovers(live, source):
    """Files of `live` that differ from, are missing in, or were added to the deployed `source` (top level only: the
    assets are one flat directory)."""
    def names(d):
        return {n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n))} if os.path.isdir(d) else set()

    have, want = names(live), names(source)
    out = [f"asset {n} missing from {live}" for n in sorted(want - have)]
    out += [f"asset {n} in {live} was not deployed" for n in sorted(have - want)]
    out += [f"asset {n} differs from its deployed version" for n in sorted(want & have)
            if not filecmp.cmp(os.path.join(live, n), os.path.join(source, n), shallow=False)]
    return out


def main():
    module = AnsibleModule(
        argument_spec={"run_dir": {"type": "path", "required": True}, "flags_file": {"type": "path"},
                       "static_dir": {"type": "path"}, "static_source": {"type": "path"}},
        required_together=[("static_dir", "static_source")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        spec = load_spec(p["run_dir"])
    except (OSError, ValueError, KeyError) as exc:
        module.fail_json(msg=f"cannot read the run's container specs under {p['run_dir']}: {exc}")
    prefix, run_label = spec["common"]["prefix"], spec["common"]["labels"].get("opsbench.run")
    out = []
    with ThreadPoolExecutor(max_workers=8) as pool:  # ~20 containers, a few podman/nsenter calls each
        for found in pool.map(lambda item: container_leftovers(prefix, *item), sorted(spec["containers"].items())):
            out += found
    if run_label:
        proc = podman("ps", "-a", "--filter", f"label=opsbench.run={run_label}", "--format", "json")
        for c in json.loads(proc.stdout or "[]"):
            labels = c.get("Labels") or {}
            if "opsbench.fault" in labels:
                out.append(f"helper container {c['Names'][0]} of fault {labels['opsbench.fault']} still exists")
            elif "opsbench.scaled" in labels:
                out.append(f"container {c['Names'][0]} was added by scaling {labels['opsbench.scaled']}")
            elif OVERRIDES_LABEL in labels and labels.get("opsbench.entity") not in spec["containers"]:
                out.append(f"unexpected container {c['Names'][0]}")
    state_dir = os.path.join(p["run_dir"], "state", "faults")
    if os.path.isdir(state_dir):
        out += [f"saved state of fault {name[:-5]} was never removed" for name in sorted(os.listdir(state_dir))
                if name.endswith(".json")]
    deployed = os.path.join(p["run_dir"], "env", "flags.deployed.json")
    if p["flags_file"] and os.path.isfile(deployed):
        with open(deployed) as fh:
            want = json.load(fh).get("flags", {})
        with open(p["flags_file"]) as fh:
            have = json.load(fh).get("flags", {})
        out += [f"feature flag {k} differs from its deployed value" for k in sorted(set(want) | set(have))
                if want.get(k) != have.get(k)]
    if p["static_dir"]:
        out += static_leftovers(p["static_dir"], p["static_source"])
    module.exit_json(changed=False, leftovers=out)


if __name__ == "__main__":
    main()
