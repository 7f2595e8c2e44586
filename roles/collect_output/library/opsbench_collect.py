#!/usr/bin/python
"""Ansible module: copy the agent's output, the trajectories and a preset's model calls into the run's artifacts,
in one module call.

One call instead of six (stat, mkdir, copy, stat x2, copy): each Ansible module call costs 0.2-0.4 s of a trial.
Only regular files are copied, never through a symlink (an agent's output.json linking elsewhere is not followed).
"""

DOCUMENTATION = r"""
module: opsbench_collect
short_description: Copy the agent's output and trajectories into the run's artifacts and describe the output
options:
  run_dir: {description: The run directory (agent/, gateway/, artifacts/)., type: path, required: true}
"""

import hashlib
import os
import stat
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule


def _regular(path):
    """(exists, lstat result when it is a regular file else None)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False, None
    return True, st if stat.S_ISREG(st.st_mode) else None


def _copy(src, dest):
    """Copy a regular file without following a link; returns its sha256."""
    digest = hashlib.sha256()
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    tmp = dest.with_name(dest.name + ".tmp")
    with os.fdopen(fd, "rb") as fin, open(tmp, "wb") as fout:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            digest.update(chunk)
            fout.write(chunk)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return digest.hexdigest()


def main():
    module = AnsibleModule(argument_spec={"run_dir": {"type": "path", "required": True}}, supports_check_mode=False)
    run = Path(module.params["run_dir"])
    artifacts = run / "artifacts"
    artifacts.mkdir(mode=0o755, exist_ok=True)
    output = run / "agent" / "output.json"
    present, st = _regular(output)
    sha256 = _copy(output, artifacts / "agent-output.json") if st else ""
    gateway_exists, gateway = _regular(run / "gateway" / "trajectory.jsonl")
    agent_exists, agent = _regular(run / "agent" / "trajectory.jsonl")
    if gateway:
        _copy(run / "gateway" / "trajectory.jsonl", artifacts / "trajectory.jsonl")
    if agent:
        _copy(run / "agent" / "trajectory.jsonl",
              artifacts / ("agent-trajectory.jsonl" if gateway_exists else "trajectory.jsonl"))
    _, model_calls = _regular(run / "gateway" / "model-calls.jsonl")  # a preset's model calls (the model proxy)
    if model_calls:
        _copy(run / "gateway" / "model-calls.jsonl", artifacts / "model-calls.jsonl")
    _, answers = _regular(run / "gateway" / "answers.jsonl")  # what the gateway's calls answered (ATIF export)
    if answers:
        _copy(run / "gateway" / "answers.jsonl", artifacts / "answers.jsonl")
    module.exit_json(changed=bool(st or gateway or agent), collect={
        "present": present, "bytes": os.lstat(output).st_size if present else 0, "sha256": sha256,
        "path": str(artifacts / "agent-output.json"), "trajectory": [gateway_exists, agent_exists]})


if __name__ == "__main__":
    main()
