"""`make test`'s xdist scheduling (tests/scheduling.py): the time-bound end-to-end tests on one worker, in order;
the host-level ones on the other, in order, beside the unit tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrator import paths
from tests.scheduling import SERIAL_GROUPS, group_of


def test_groups_by_path() -> None:
    assert group_of("tests/e2e/test_lifecycle.py::test_wrong_diagnosis_scores_zero") == "e2e"
    assert group_of("tests/e2e/test_faults.py::test_fault_manifests_recovers_and_leaves_nothing[fault_x]") == "e2e"
    assert group_of("tests/e2e/test_ciso.py::test_baseline_agent_finds_the_injected_misconfiguration") == "e2e-hosts"
    assert group_of("tests/e2e/test_finops.py::test_x") == "e2e-hosts"
    assert group_of("tests/e2e/test_finops_cost.py::test_x") == "e2e"  # the shop: time-bound, not a host test
    assert group_of("tests/unit/test_k8s_offline.py::test_x[1.30]") == "k8s_offline"
    unit = "tests/unit/test_spec.py::test_a"
    assert group_of(unit) == unit


def test_every_e2e_file_is_in_a_serial_group_and_every_named_file_exists() -> None:
    for path in sorted((paths.PROJECT_ROOT / "tests" / "e2e").glob("test_*.py")):
        assert group_of(f"tests/e2e/{path.name}::test_x") in {"e2e", "e2e-hosts"}, path
    for prefix in SERIAL_GROUPS:
        assert (paths.PROJECT_ROOT / prefix).exists(), prefix  # a renamed file would silently join `e2e`


def test_each_e2e_group_runs_on_its_own_worker_in_order_beside_the_unit_tests(tmp_path: Path) -> None:
    """A real `pytest -n 2 --dist loadgroup` over a throwaway tree with our scheduler: each test writes which
    worker ran it, and when."""
    log = tmp_path / "ran.txt"
    body = ("import os, time\n\n"
            "def _note(name):\n"
            f"    with open({str(log)!r}, 'a') as f:\n"
            "        f.write(f\"{name} {os.environ['PYTEST_XDIST_WORKER']} {time.monotonic()}\\n\")\n"
            "    time.sleep(0.3)\n\n")
    # e1-e4: the time-bound group; ciso and images (real file names): the hosts group; u1-u4: unit tests.
    for sub, names in (("e2e", ["e1", "e2", "e3", "e4", "ciso", "images"]), ("unit", ["u1", "u2", "u3", "u4"])):
        (tmp_path / "tests" / sub).mkdir(parents=True, exist_ok=True)
        for name in names:
            test = body + f"def test_{name}():\n    _note('{name}')\n"
            (tmp_path / "tests" / sub / f"test_{name}.py").write_text(test)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(paths.PROJECT_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.scheduling", "-n", "2", "--dist", "loadgroup",
                           "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in log.read_text().splitlines()]
    assert sorted(r[0] for r in rows) == ["ciso", "e1", "e2", "e3", "e4", "images", "u1", "u2", "u3", "u4"]
    e2e = [r for r in rows if r[0] in {"e1", "e2", "e3", "e4"}]
    hosts = [r for r in rows if r[0] in {"ciso", "images"}]
    assert len({r[1] for r in e2e}) == 1 and len({r[1] for r in hosts}) == 1, rows  # one worker each
    assert e2e[0][1] != hosts[0][1], rows  # ... and not the same one
    assert [r[0] for r in sorted(e2e, key=lambda r: float(r[2]))] == ["e1", "e2", "e3", "e4"]  # in order
    assert [r[0] for r in sorted(hosts, key=lambda r: float(r[2]))] == ["ciso", "images"]
    unit_workers = {r[1] for r in rows if r[0].startswith("u")}
    assert unit_workers - {e2e[0][1]}, rows  # the other worker ran unit tests meanwhile
