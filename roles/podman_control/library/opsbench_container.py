#!/usr/bin/python
"""Ansible module: put one container of a run into a state, from the spec its deploy recorded."""

DOCUMENTATION = r"""
module: opsbench_container
short_description: Recreate, restore, stop, start, pause or query one container of a run
description:
  - Works on the container of entity C(entity) (e.g. cart-1) of the run in C(run_dir), whose
    environment recorded every container's spec in run_dir/env/containers.json at deploy.
  - C(recreated) replaces the container with one built from its spec plus C(overrides) (env is
    merged; image, command, memory, cpus, restart, secrets, mounts, add_hosts, sysctls, dns,
    dns_options, ulimits replace). The overrides are
    recorded in a label, so recreating with the same overrides again changes nothing. A container
    that cannot start (e.g. its image does not exist) is reported in C(start_error), not failed,
    since that is what such a fault intends.
  - C(restored) returns the container to exactly its deployed spec, running and unpaused;
    a container carrying overrides or missing is recreated, a stopped one started, a paused one
    unpaused; a container already as deployed is left alone.
  - C(stopped), C(started), C(paused), C(unpaused) change only the run state. C(query) changes
    nothing. Every call returns C(before) and C(after), the container's live state.
options:
  run_dir:
    description: The run's directory (opsbench_run_dir).
    type: path
    required: true
  entity:
    description: Entity id of the container (the id in containers.json, e.g. cart-1).
    type: str
    required: true
  state:
    description: Desired state.
    type: str
    choices: [recreated, restored, stopped, started, paused, unpaused, query]
    default: query
  overrides:
    description: Spec keys to change when recreating.
    type: dict
    default: {}
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_podman import (OVERRIDES_LABEL, apply_overrides, inspect, load_spec, podman,
                                                  run_args)


def remove(name, attempts=3):
    """podman rm --force, retried: a container that exits while podman stops it makes rm fail with
    "container not running" (seen on a loaded machine); the next attempt finds it stopped and removes it."""
    for _ in range(attempts - 1):
        if podman("rm", "--force", "--time", "1", name).returncode == 0 or inspect(name) is None:
            return
        time.sleep(0.5)
    podman("rm", "--force", "--time", "1", name, check=True)


def recreate(name, spec, common, overrides):
    if inspect(name) is not None:
        remove(name)
    labels = {OVERRIDES_LABEL: json.dumps(overrides, sort_keys=True)} if overrides else None
    args = run_args(apply_overrides(spec, overrides), common, labels)
    proc = podman(*args[1:])
    if proc.returncode != 0:
        # podman may leave a created-but-never-started container behind: remove it, so the
        # container is simply missing, as after a failed image pull.
        podman("rm", "--force", name)
        return proc.stderr.strip()[-500:] or f"podman run exited {proc.returncode}"
    return None


def wait_running(name, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cur = inspect(name)
        if cur and cur["running"]:
            return cur
        time.sleep(0.2)
    return inspect(name)


def main():
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "entity": {"type": "str", "required": True},
            "state": {"type": "str", "default": "query",
                      "choices": ["recreated", "restored", "stopped", "started", "paused", "unpaused", "query"]},
            "overrides": {"type": "dict", "default": {}},
        },
    )
    p = module.params
    try:
        spec = load_spec(p["run_dir"])
    except (OSError, ValueError, KeyError) as exc:
        module.fail_json(msg=f"cannot read the run's container specs under {p['run_dir']}: {exc}; "
                             "is the environment deployed and container-based?")
    if p["entity"] not in spec["containers"]:
        module.fail_json(msg=f"entity '{p['entity']}' is not a container of this run "
                             f"(known: {', '.join(sorted(spec['containers']))})")
    common, cspec = spec["common"], spec["containers"][p["entity"]]
    name = f"{common['prefix']}-{p['entity']}"
    before = inspect(name)
    state, changed, start_error = p["state"], False, None
    want = json.loads(json.dumps(p["overrides"], sort_keys=True))

    if module.check_mode or state == "query":
        module.exit_json(changed=False, before=before, after=before, name=name)
    try:
        if state == "recreated":
            if before is None or (before["overrides"] or {}) != want:
                start_error = recreate(name, cspec, common, want)
                # Missing before and still missing (its overrides cannot start, e.g. an image that does not
                # exist, injected a second time): nothing changed.
                changed = not (before is None and start_error is not None and inspect(name) is None)
        elif state == "restored":
            if before is None or before["overrides"]:
                start_error = recreate(name, cspec, common, {})
                changed = True
            elif before["paused"]:
                podman("unpause", name, check=True)
                changed = True
            elif not before["running"]:
                podman("start", name, check=True)
                changed = True
            if changed and start_error is None:
                wait_running(name)
        elif state == "stopped":
            if before is None:
                module.fail_json(msg=f"container {name} does not exist")
            if before["paused"]:
                podman("unpause", name, check=True)
            if before["running"] or before["paused"]:
                podman("stop", "--time", "1", name, check=True)
                changed = True
        elif state == "started":
            if before is not None and before["paused"]:
                podman("unpause", name, check=True)
                changed = True
            elif before is None or not before["running"]:
                podman("start", name, check=True)
                changed = True
        elif state == "paused":
            # A paused container does not count as running: check paused first (idempotency).
            if before is not None and before["paused"]:
                pass
            elif before is None or not before["running"]:
                module.fail_json(msg=f"container {name} is not running; cannot pause it")
            else:
                podman("pause", name, check=True)
                changed = True
        elif state == "unpaused":
            if before is not None and before["paused"]:
                podman("unpause", name, check=True)
                changed = True
    except RuntimeError as exc:
        module.fail_json(msg=f"{name}: {exc}", before=before)
    after = inspect(name)
    module.exit_json(changed=changed, before=before, after=after, name=name, start_error=start_error)


if __name__ == "__main__":
    main()
