"""Harnesses that drive many runs or measure the machinery, on top of the one-run lifecycle.

`verify` proves scenarios without an agent (``opsbench verify-scenarios``), `campaign` runs scenarios x agents x
trials on shared environments (``opsbench campaign``), `bench_lifecycle` measures the lifecycle with a no-op agent
(``opsbench bench``), `bench` and `bench_local` measure the orchestrator against bare ansible-playbook and the
local backend's footprint (``make bench``, ``make bench-local``).
"""
