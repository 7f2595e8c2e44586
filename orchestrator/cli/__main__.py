"""``python -m orchestrator.cli``: the ``opsbench`` command (tests and roles call it this way)."""

from orchestrator.cli import main

main()
