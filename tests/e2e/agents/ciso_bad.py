"""A CISO agent that submits a bad fetcher on purpose (e2e tests of the evaluator's guards).

Usage: python ciso_bad.py hang|write. ``hang``: the fetcher runs a command in the target host that never
ends. ``write``: the fetcher changes /etc/ssh/sshd_config and adds /etc/opsbench-fetcher-was-here, then
writes evidence. Both come with a valid policy."""

import json
import os
import sys
from pathlib import Path

TASKS = {
    "hang": """    - name: Never finish
      ansible.builtin.command: sleep 3600
      changed_when: false
""",
    "write": """    - name: Change what should only be read
      ansible.builtin.shell: echo 'PermitRootLogin no' >> /etc/ssh/sshd_config && touch /etc/opsbench-fetcher-was-here
      changed_when: true
""",
}

mode = sys.argv[1]
playbook = f"""---
- name: A bad fetcher ({mode})
  hosts: target
  gather_facts: false
  tasks:
{TASKS[mode]}    - name: Write evidence
      ansible.builtin.copy:
        dest: "{{{{ evidence_path }}}}"
        content: '{{"ok": true}}'
        mode: "0644"
      delegate_to: localhost
      run_once: true
"""
policy = "package bad\n\nimport rego.v1\n\ndefault compliant := false\n"
Path(os.environ["OPSBENCH_OUTPUT"]).write_text(json.dumps({"schema": "opsbench/ciso/v1", "artifacts": [
    {"name": "playbook.yml", "kind": "ansible_playbook", "content": playbook},
    {"name": "policy.rego", "kind": "rego", "content": policy}]}))
