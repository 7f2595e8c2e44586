# Shared by the podman_control modules: how a run's container is created from its spec, and
# how to read its live state. One place, so a fault's "restore" recreates a container exactly
# as the environment's deploy created it.

import json
import os
import subprocess
import tempfile

SPEC_FILE = "env/containers.json"
OVERRIDES_LABEL = "opsbench.overrides"


def conmon_dir():
    """The working directory for podman commands that start containers. Their conmon inherits it and, when the
    kernel OOM-kills the container, creates an empty file `oom` there (conmon's write_oom_files): without this,
    in whatever directory Ansible or the gateway ran in (the project's playbooks/)."""
    path = os.path.join(tempfile.gettempdir(), "opsbench-conmon")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def podman(*args, check=False, timeout=120):
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, cwd=conmon_dir())
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {args[0]} failed: {proc.stderr.strip()[-500:]}")
    return proc


def run_args(c, p, extra_labels=None):
    """`podman run -d` arguments for container spec c with the run's common parameters p."""
    args = ["podman", "run", "-d", "--name", f"{p['prefix']}-{c['id']}", "--hostname", c["id"],
            "--init", "--stop-timeout", "3", "--memory", str(c.get("memory") or p["memory"])]
    net = p["network"]
    if c.get("aliases"):
        net += ":" + ",".join(f"alias={a}" for a in c["aliases"])
    args += ["--network", net]
    labels = dict(p.get("labels") or {})
    labels.update({"opsbench.entity": c["id"], "opsbench.service": c.get("service", c["id"])})
    labels.update(c.get("labels") or {})
    labels.update(extra_labels or {})
    for key, value in sorted(labels.items()):
        args += ["--label", f"{key}={value}"]
    for key, value in sorted((c.get("env") or {}).items()):
        args += ["--env", f"{key}={value}"]
    for env_name, secret in sorted((c.get("secrets") or {}).items()):
        args += ["--secret", f"{p['prefix']}-{secret},type=env,target={env_name}"]
    for vol in list(p.get("volumes") or []) + list(c.get("volumes") or []):
        args += ["--volume", vol]
    for mount in c.get("mounts") or []:
        args += ["--mount", mount]
    for pub in c.get("publish") or []:
        args += ["--publish", pub]
    for entry in c.get("add_hosts") or []:  # "name:address" lines in the container's /etc/hosts
        args += ["--add-host", entry]
    for key, value in sorted((c.get("sysctls") or {}).items()):  # namespaced kernel settings, e.g. net.ipv4.*
        args += ["--sysctl", f"{key}={value}"]
    for server in c.get("dns") or []:  # the container's resolv.conf nameservers instead of the network's
        args += ["--dns", str(server)]
    for option in c.get("dns_options") or []:  # resolv.conf options, e.g. timeout:1
        args += ["--dns-option", str(option)]
    for ulimit in c.get("ulimits") or []:  # "nofile=64:64"
        args += ["--ulimit", str(ulimit)]
    if c.get("stop_signal"):
        args += ["--stop-signal", str(c["stop_signal"])]
    if c.get("cpus"):
        args += ["--cpus", str(c["cpus"])]
    if c.get("restart"):
        args += ["--restart", str(c["restart"])]
    args.append(c["image"])
    args += [str(a) for a in c.get("command") or []]
    return args


def load_spec(run_dir):
    """The run's deployed containers: {'common': {...}, 'containers': {id: spec}}."""
    path = os.path.join(run_dir, SPEC_FILE)
    with open(path) as fh:
        data = json.load(fh)
    return {"common": data["common"], "containers": {c["id"]: c for c in data["containers"]}}


def inspect(name):
    """Live state of one container, or None when it does not exist."""
    proc = podman("container", "inspect", name, timeout=30)
    if proc.returncode != 0:
        return None
    info = json.loads(proc.stdout)[0]
    state = info.get("State") or {}
    labels = (info.get("Config") or {}).get("Labels") or {}
    nets = (info.get("NetworkSettings") or {}).get("Networks") or {}
    return {
        "name": name,
        "status": state.get("Status"),
        "running": bool(state.get("Running")),
        "paused": bool(state.get("Paused")),
        "pid": state.get("Pid") or 0,
        "ips": sorted({n.get("IPAddress") for n in nets.values() if n.get("IPAddress")}),
        "overrides": json.loads(labels[OVERRIDES_LABEL]) if labels.get(OVERRIDES_LABEL) else None,
        "image": (info.get("ImageName") or (info.get("Config") or {}).get("Image")),
        "restarts": info.get("RestartCount", 0),
    }


def apply_overrides(spec, overrides):
    """A container spec with a fault's overrides: env and secrets are merged, image_tag replaces the
    image's tag, other keys replace."""
    out = dict(spec)
    for key, value in (overrides or {}).items():
        if key == "image_tag":
            out["image"] = spec["image"].rsplit(":", 1)[0] + ":" + str(value)
        elif key == "env":
            out["env"] = {**(spec.get("env") or {}), **value}
        elif key == "secrets":
            out["secrets"] = {**(spec.get("secrets") or {}), **value}
        else:
            out[key] = value
    return out
