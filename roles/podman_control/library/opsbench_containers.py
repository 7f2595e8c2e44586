#!/usr/bin/python
"""Ansible module: start many podman containers of one run in parallel (idempotent).

containers.podman.podman_container costs about a second of Ansible overhead per container
even when run async; a deploy starts ~20, so this module starts them with a thread pool in
one task. A container that already runs is left alone; one that exists but is stopped is
started; a missing one is created with `podman run -d`.
"""

DOCUMENTATION = r"""
module: opsbench_containers
short_description: Start a run's podman containers in parallel
description:
  - Creates and starts every container described in C(containers) on C(network), in parallel.
  - Idempotent: running containers are not touched (reported unchanged).
options:
  containers:
    description: Containers; each has id, image, and optional command, aliases, env, secrets
      (env name -> podman secret name), publish, volumes, mounts, memory, cpus, restart,
      stop_signal, service, labels.
    type: list
    elements: dict
    required: true
  prefix:
    description: Name prefix; a container is named <prefix>-<id>.
    type: str
    required: true
  network:
    description: Network to attach the containers to.
    type: str
    required: true
  volumes:
    description: Volumes mounted into every container (podman -v syntax).
    type: list
    elements: str
    default: []
  labels:
    description: Labels put on every container.
    type: dict
    default: {}
  memory:
    description: Memory limit of each container.
    type: str
    default: 256m
  parallel:
    description: How many podman commands to run at once.
    type: int
    default: 4
"""

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_podman import conmon_dir, run_args


def state_of(name):
    proc = subprocess.run(["podman", "container", "inspect", "--format", "{{.State.Status}}", name],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure(c, p):
    name = f"{p['prefix']}-{c['id']}"
    state = state_of(name)
    if state == "running":
        return {"id": c["id"], "changed": False, "action": "none"}
    cmd = ["podman", "start", name] if state else run_args(c, p)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=conmon_dir())
    if proc.returncode != 0:
        return {"id": c["id"], "changed": False, "failed": True, "action": cmd[1],
                "msg": f"{name}: podman {cmd[1]} failed: {proc.stderr.strip()[-500:]}"}
    return {"id": c["id"], "changed": True, "action": "started" if state else "created"}


def main():
    module = AnsibleModule(
        argument_spec={
            "containers": {"type": "list", "elements": "dict", "required": True},
            "prefix": {"type": "str", "required": True},
            "network": {"type": "str", "required": True},
            "volumes": {"type": "list", "elements": "str", "default": []},
            "labels": {"type": "dict", "default": {}},
            "memory": {"type": "str", "default": "256m"},
            "parallel": {"type": "int", "default": 4},
        },
    )
    p = module.params
    with ThreadPoolExecutor(max_workers=max(1, p["parallel"])) as pool:
        results = list(pool.map(lambda c: ensure(c, p), p["containers"]))
    failed = [r for r in results if r.get("failed")]
    changed = any(r["changed"] for r in results)
    if failed:
        module.fail_json(msg="; ".join(r["msg"] for r in failed), results=results, changed=changed)
    module.exit_json(changed=changed, results=results, summary=json.dumps(
        {r["id"]: r["action"] for r in results}))


if __name__ == "__main__":
    main()
