"""End-to-end: playbooks/images.yml configures podman and builds the local backend's images.

The images live in machine-wide storage and are tagged by the hash of their build inputs, so
the first run here builds only what changed (minutes when cold, seconds when cached) and the
second run must build nothing. Every container and network the tests create is removed again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.gateway.control import podman_helpers
from orchestrator.runner import StepResult, run_playbook

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None,
                       reason="image builds need root on Debian/Ubuntu"),
]

IMAGES = ("opsbench-base", "opsbench-infra", "opsbench-pyruntime", "opsbench-shop", "opsbench-cishost",
          "opsbench-workspace")
WARM_RUN_LIMIT = 90.0  # seconds; measured ~15 s for ansible-playbook, plus ansible-runner's start


@dataclass
class Build:
    state_dir: Path
    result: StepResult
    changed: list[str]

    @property
    def podman_env(self) -> dict[str, str]:
        conf = self.state_dir / "containers"
        return {**os.environ, "CONTAINERS_CONF": str(conf / "containers.conf"),
                "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf")}


def build_images(state_dir: Path, data_dir: Path) -> Build:
    """Run images.yml the way the orchestrator runs every step (ansible-runner, ansible_env())."""
    changed: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("res", {}).get("changed"):
            changed.append(f"{data.get('role', '')} : {data.get('task', '?')}")
        elif event.get("event") == "runner_item_on_ok" and data.get("res", {}).get("changed"):
            changed.append(f"{data.get('role', '')} : {data.get('task', '?')} (item)")

    result = run_playbook("images", "images.yml", {"opsbench_state_dir": str(state_dir)}, data_dir,
                          job_timeout=1800, idle_timeout=900, on_event=on_event)
    assert result.ok, f"images.yml failed ({result.status}): {result.failures}"
    return Build(state_dir, result, changed)


def podman(build: Build, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], env=build.podman_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check:
        assert proc.returncode == 0, f"podman {' '.join(args)}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """One run of images.yml with a private state dir (the image storage is machine-wide)."""
    root = tmp_path_factory.mktemp("images")
    return build_images(root / "state", root / "run1")


def test_images_are_built_tagged_by_content_and_reported(built: Build) -> None:
    images = built.result.stats.get("images")
    assert isinstance(images, dict) and set(images) == set(IMAGES), built.result.stats
    on_disk = json.loads((built.state_dir / "images.json").read_text())
    assert on_disk == images
    ids = {}
    for name, tag in images.items():
        assert re.fullmatch(rf"localhost/{name}:[0-9a-f]{{12}}", tag), tag
        podman(built, "image", "exists", tag)
        ids[tag] = podman(built, "image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()
        current = podman(built, "image", "inspect", "--format", "{{.Id}}", f"localhost/{name}:current")
        assert current.stdout.strip() == ids[tag], f"localhost/{name}:current does not point at {tag}"
    # The engine uses OpsBench's configuration, not the system's.
    info = json.loads(podman(built, "info", "--format", "json").stdout)
    assert info["host"]["ociRuntime"]["name"] == "runc"
    assert info["host"]["cgroupManager"] == "cgroupfs"
    assert info["store"]["graphRoot"] == "/var/lib/opsbench/containers/storage"


def test_second_run_builds_nothing_and_is_fast(built: Build, tmp_path: Path) -> None:
    start = time.monotonic()
    again = build_images(built.state_dir, tmp_path / "run2")
    elapsed = time.monotonic() - start
    assert again.changed == [], f"a cached run changed: {again.changed}"
    assert again.result.stats["images"] == built.result.stats["images"]
    assert elapsed < WARM_RUN_LIMIT, f"a cached run took {elapsed:.1f}s"


def test_infra_image_runs_prometheus(built: Build) -> None:
    proc = podman(built, "run", "--rm", "localhost/opsbench-infra:current", "prometheus", "--version")
    assert "prometheus, version" in proc.stdout + proc.stderr


def test_pyruntime_has_the_python_libraries(built: Build) -> None:
    podman(built, "run", "--rm", "localhost/opsbench-pyruntime:current", "python3", "-c",
           "import prometheus_client, redis, psycopg2, opentelemetry.sdk")


def test_shop_image_holds_the_application_without_caches(built: Build) -> None:
    podman(built, "run", "--rm", "localhost/opsbench-shop:current", "sh", "-c",
           "test -f /opt/shop/shop/__main__.py && test -z \"$(find /opt/shop -name __pycache__ -o -name '*.pyc')\"")


@pytest.fixture
def network(built: Build) -> Iterator[tuple[str, list[str]]]:
    """A fresh bridge network and a list to put container names in; both removed afterwards."""
    name = f"obtest-{uuid.uuid4().hex[:8]}"
    containers: list[str] = []
    podman(built, "network", "create", name)
    try:
        yield name, containers
    finally:
        for container in containers:
            podman(built, "rm", "--force", "--time", "0", container, check=False)
        podman(built, "network", "rm", "--force", name, check=False)
        assert podman(built, "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}}").stdout.strip() == ""
        assert name not in podman(built, "network", "ls", "--format", "{{.Name}}").stdout.split()


def test_containers_on_a_bridge_network_reach_each_other_by_alias(built: Build,
                                                                  network: tuple[str, list[str]]) -> None:
    net, containers = network
    server = f"{net}-web"
    containers.append(server)
    podman(built, "run", "--detach", "--name", server, "--network", net, "--network-alias", "web",
           "localhost/opsbench-pyruntime:current", "python3", "-m", "http.server", "8080")
    # aardvark-dns resolves the alias; retry while the server starts.
    client = podman(built, "run", "--rm", "--network", net, "localhost/opsbench-infra:current", "sh", "-c",
                    "for i in $(seq 50); do curl -sf -o /dev/null http://web:8080/ && exit 0; sleep 0.2; done;"
                    " getent hosts web; exit 1", check=False)
    assert client.returncode == 0, f"client could not reach web:8080\n{client.stdout}\n{client.stderr}"


def test_an_oom_killed_container_leaves_no_file_where_its_starter_ran(built: Build, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """conmon creates an empty `oom` in its working directory when the kernel OOM-kills the container; podman
    commands that start containers run in podman_control's conmon_dir, so none lands in the project's tree."""
    helpers = podman_helpers()
    workdir = tmp_path / "caller"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("CONTAINERS_CONF", built.podman_env["CONTAINERS_CONF"])
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", built.podman_env["CONTAINERS_STORAGE_CONF"])
    marker = Path(helpers.conmon_dir()) / "oom"
    marker.unlink(missing_ok=True)
    proc = helpers.podman("run", "--rm", "--memory", "12m", "localhost/opsbench-pyruntime:current",
                          "python3", "-c", "x = bytearray(200 * 1024 * 1024)")
    assert proc.returncode == 137, proc.stderr  # OOM-killed
    assert list(workdir.iterdir()) == []
    assert marker.is_file()  # conmon did write it: in the directory meant for it
