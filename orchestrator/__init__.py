"""OpsBench orchestrator: loads scenario specs and sequences ansible-runner invocations."""

__version__ = "0.1.0"
