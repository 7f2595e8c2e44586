"""`make test`'s xdist scheduling (tests/scheduling.py): every end-to-end test on one worker, in order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrator import paths
from tests.scheduling import group_of


def test_groups_by_path() -> None:
    assert group_of("tests/e2e/test_lifecycle.py::test_wrong_diagnosis_scores_zero") == "e2e"
    assert group_of("tests/e2e/test_faults.py::test_fault_manifests_recovers_and_leaves_nothing[fault_x]") == "e2e"
    assert group_of("tests/unit/test_k8s_offline.py::test_x[1.30]") == "k8s_offline"
    unit = "tests/unit/test_spec.py::test_a"
    assert group_of(unit) == unit


def test_every_e2e_file_is_in_the_serial_group() -> None:
    for path in sorted((paths.PROJECT_ROOT / "tests" / "e2e").glob("test_*.py")):
        assert group_of(f"tests/e2e/{path.name}::test_x") == "e2e", path


def test_e2e_tests_run_on_one_worker_in_order_beside_the_unit_tests(tmp_path: Path) -> None:
    """A real `pytest -n 2 --dist loadgroup` over a throwaway tree with our scheduler: each test writes which
    worker ran it, and when."""
    log = tmp_path / "ran.txt"
    body = ("import os, time\n\n"
            "def _note(name):\n"
            f"    with open({str(log)!r}, 'a') as f:\n"
            "        f.write(f\"{name} {os.environ['PYTEST_XDIST_WORKER']} {time.monotonic()}\\n\")\n"
            "    time.sleep(0.3)\n\n")
    for sub, names in (("e2e", ["e1", "e2", "e3", "e4"]), ("unit", ["u1", "u2", "u3", "u4"])):
        (tmp_path / "tests" / sub).mkdir(parents=True)
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
    assert sorted(r[0] for r in rows) == ["e1", "e2", "e3", "e4", "u1", "u2", "u3", "u4"]
    e2e = [r for r in rows if r[0].startswith("e")]
    assert len({r[1] for r in e2e}) == 1, rows  # one worker
    assert [r[0] for r in sorted(e2e, key=lambda r: float(r[2]))] == ["e1", "e2", "e3", "e4"]  # in order
    unit_workers = {r[1] for r in rows if r[0].startswith("u")}
    assert unit_workers - {e2e[0][1]}, rows  # the other worker ran unit tests meanwhile
