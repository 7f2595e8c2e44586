"""Every playbook passes `ansible-playbook --syntax-check` (the kubernetes backend's included); ansible-lint
of playbooks and roles runs in `make lint`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator import paths
from orchestrator.runner import ansible_env

# Beside the playbooks lives the AWX execution environment's definition (ansible-lint checks it against its schema).
PLAYBOOKS = sorted(p for p in (paths.PROJECT_ROOT / "playbooks").glob("*.yml") if p.name != "execution-environment.yml")


def test_every_playbook_passes_syntax_check():
    assert {"deploy.yml", "k8s_render.yml", "k8s_images.yml", "agent.yml"} <= {p.name for p in PLAYBOOKS}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check",
                           *map(str, PLAYBOOKS)], cwd=paths.PROJECT_ROOT, env=ansible_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
