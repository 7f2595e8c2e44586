"""The Ansible child gets an allow-listed environment: secrets in ours never reach its artifacts."""

from __future__ import annotations

from orchestrator.runner import scrub_env


def test_scrub_env_drops_secrets_and_keeps_what_ansible_needs():
    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/x",
        "ANSIBLE_CONFIG": "/repo/ansible.cfg",
        "ANSIBLE_HOME": "/state/ansible",
        "RUNNER_OMIT_EVENTS": "False",
        "OPSBENCH_HOME": "/state",
        "OPENAI_API_KEY": "sk-secret",
        "ANTHROPIC_API_KEY": "secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "GITHUB_TOKEN": "ghp_x",
        "ANSIBLE_VAULT_PASSWORD": "secret",
        "ANSIBLE_BECOME_PASS": "secret",
        "ANSIBLE_NET_PASSWORD": "secret",
        "PYTHONPATH": "/somewhere",
    }
    assert scrub_env(env) == {
        "PATH": "/usr/bin",
        "HOME": "/home/x",
        "ANSIBLE_CONFIG": "/repo/ansible.cfg",
        "ANSIBLE_HOME": "/state/ansible",
        "RUNNER_OMIT_EVENTS": "False",
        "OPSBENCH_HOME": "/state",
    }


def test_scrub_env_does_not_mutate_its_input():
    env = {"PATH": "/bin", "OPENAI_API_KEY": "sk"}
    scrub_env(env)
    assert env == {"PATH": "/bin", "OPENAI_API_KEY": "sk"}


def test_closing_the_pty_of_a_reaped_playbook_does_not_wait_and_a_live_child_is_still_stopped() -> None:
    """The 0.1 s ptyprocess sleeps in close() is skipped only once the child is reaped (issue 23)."""
    import time

    import ptyprocess

    from orchestrator.runner import close_reaped

    done = ptyprocess.PtyProcess.spawn(["true"])
    while done.isalive():
        time.sleep(0.01)
    start = time.monotonic()
    close_reaped(done)
    assert done.closed and time.monotonic() - start < 0.05

    alive = ptyprocess.PtyProcess.spawn(["sleep", "30"])
    close_reaped(alive)
    assert alive.closed and alive.delayafterclose == 0.1 and not alive.isalive()
