#!/usr/bin/python
"""Ansible module: the live instances (containers) of some services of a run."""

DOCUMENTATION = r"""
module: opsbench_instances
short_description: List the containers of services of a run, with their addresses and state
description:
  - For each service in C(services), the containers the deploy recorded for it
    (run_dir/env/containers.json) with entity id, container name, IP addresses on the run
    network, PID and state. Changes nothing.
  - A service name that has no container fails with the list of known services, so a typo in a
    scenario's fault arguments is reported at injection with what would have been valid.
options:
  run_dir:
    description: The run's directory (opsbench_run_dir).
    type: path
    required: true
  services:
    description: Service names (e.g. frontend), or entity ids of single containers (e.g. frontend-2).
    type: list
    elements: str
    required: true
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.opsbench_podman import inspect, load_spec


def main():
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "services": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        spec = load_spec(p["run_dir"])
    except (OSError, ValueError, KeyError) as exc:
        module.fail_json(msg=f"cannot read the run's container specs under {p['run_dir']}: {exc}")
    prefix = spec["common"]["prefix"]
    by_service = {}
    for cid, c in spec["containers"].items():
        by_service.setdefault(c.get("service", cid), []).append(cid)
    out = {}
    for name in p["services"]:
        ids = sorted(by_service.get(name, [])) or ([name] if name in spec["containers"] else [])
        if not ids:
            module.fail_json(msg=f"'{name}' is neither a service nor a container of this run "
                                 f"(services: {', '.join(sorted(by_service))})")
        out[name] = []
        for cid in ids:
            cur = inspect(f"{prefix}-{cid}") or {}
            out[name].append({"entity": cid, "service": spec["containers"][cid].get("service", cid),
                              "name": f"{prefix}-{cid}", "ips": cur.get("ips", []), "pid": cur.get("pid", 0),
                              "running": cur.get("running", False), "paused": cur.get("paused", False)})
    module.exit_json(changed=False, instances=out, prefix=prefix, network=spec["common"]["network"])


if __name__ == "__main__":
    main()
