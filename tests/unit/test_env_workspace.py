"""The workspace environment's role (roles/env_workspace) and image inputs agree with each other, offline.

The live behaviour (builds and tests in the container, no network, limits, pristine, teardown) is proven by
tests/e2e/test_workspace_env.py; these checks keep the static parts consistent: the application name selects the
role, the argument spec lists exactly the projects that exist, the declared topology covers every project, and the
image carries the user, wheels and Maven plugin versions the projects need.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import yaml

from orchestrator import paths
from orchestrator.argspecs import check_role_args, entry_options, resolve_role_vars
from orchestrator.role_topology import load_topology
from orchestrator.spec import environment_role

ROLE = paths.ROLES_DIR / "env_workspace"
PROJECTS_DIR = ROLE / "files" / "projects"
IMAGE_DEFAULTS = yaml.safe_load((paths.ROLES_DIR / "image_build" / "defaults" / "main.yml").read_text())


def projects() -> list[str]:
    return sorted(p.name for p in PROJECTS_DIR.iterdir() if p.is_dir())


def test_the_application_selects_the_role() -> None:
    assert environment_role("workspace") == "env_workspace"
    assert environment_role("workspace", "kubernetes") == "env_workspace"


def test_the_spec_offers_exactly_the_projects_that_exist() -> None:
    option = entry_options("env_workspace", "deploy")["env_workspace_projects"]
    assert sorted(option["choices"]) == projects() == sorted(option["default"])
    assert resolve_role_vars("env_workspace", "deploy", {"projects": ["ratelimit"]})["env_workspace_projects"] == [
        "ratelimit"]
    assert check_role_args("env_workspace", "deploy", {"projects": ["ratelimit"], "pids_limit": 256}) == []
    problems = check_role_args("env_workspace", "deploy", {"projects": ["left-pad"]})
    assert problems and "left-pad" in problems[0]
    for entry in ("deploy", "main", "teardown", "pristine"):
        assert entry in yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def test_the_topology_declares_every_project_and_its_build_files() -> None:
    topology = load_topology("workspace")
    assert topology is not None
    ids = {e["id"] for e in topology["entities"] if e["kind"] != "process"}
    assert ids == {"workspace", *projects(), *(f"{p}-build" for p in projects())}
    # The background services of the monitoring scenarios (fault_workspace_process) are process entities too.
    services = yaml.safe_load((ROLE.parent / "fault_workspace_process" / "defaults" / "main.yml").read_text())
    processes = {e["id"] for e in topology["entities"] if e["kind"] == "process"}
    assert processes == set(services["fault_workspace_process_services"])
    edges = {(e["source"], e["target"]) for e in topology["edges"] if e["target"] not in processes}
    assert edges == {*(("workspace", p) for p in projects()), *((p, f"{p}-build") for p in projects())}


def test_each_project_says_how_to_build_and_test_it_and_ignores_its_build_output() -> None:
    for project in projects():
        readme = (PROJECTS_DIR / project / "README.md").read_text()
        assert "test" in readme.lower(), project
        assert (PROJECTS_DIR / project / ".gitignore").is_file(), project


def test_the_maven_project_pins_plugin_versions_debian_ships() -> None:
    """Debian's repository holds only some versions of each plugin; the offline build resolves exactly the pinned
    ones (checked live in the image; here the POM against what the image's packages were chosen for)."""
    pom = (PROJECTS_DIR / "stockkeeper" / "pom.xml").read_text()
    pinned = dict(re.findall(r"<artifactId>(maven-[a-z-]+-plugin)</artifactId>\s*<version>([^<]+)</version>", pom))
    assert pinned == {"maven-clean-plugin": "3.2.0", "maven-resources-plugin": "3.3.0",
                      "maven-compiler-plugin": "3.10.1", "maven-surefire-plugin": "2.22.3",
                      "maven-jar-plugin": "3.3.0", "maven-install-plugin": "3.1.0"}
    packages = set(IMAGE_DEFAULTS["image_build_workspace_packages"])
    assert {"libmaven-clean-plugin-java", "libmaven-resources-plugin-java", "libmaven-compiler-plugin-java",
            "libsurefire-java", "libmaven-jar-plugin-java", "libmaven-install-plugin-java", "junit4",
            "maven-debian-helper"} <= packages
    config = (PROJECTS_DIR / "stockkeeper" / ".mvn" / "maven.config").read_text().split()
    assert "--offline" in config and "--settings=/etc/maven/settings-debian.xml" in config


def test_the_wheel_cache_holds_what_the_python_project_needs() -> None:
    """pip in the workspace has no index: the build backend, the runtime and the test requirements (with their
    dependencies) must all be wheels in the cache, each pinned."""
    wheels = {w.split("==")[0].lower(): w.split("==")[1] for w in IMAGE_DEFAULTS["image_build_workspace_wheels"]}
    assert all(wheels.values())
    pyproject = tomllib.loads((PROJECTS_DIR / "invoicer" / "pyproject.toml").read_text())
    wanted = [*pyproject["build-system"]["requires"], *pyproject["project"]["dependencies"],
              *pyproject["project"]["optional-dependencies"]["test"]]
    names = {re.split(r"[<>=!~\[; ]", w, maxsplit=1)[0].lower() for w in wanted}
    assert names == {"setuptools", "python-dateutil", "pytest"} and names <= set(wheels)
    assert {"six", "pluggy", "iniconfig", "packaging"} <= set(wheels)


def test_the_image_user_matches_what_the_role_publishes() -> None:
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert role_vars["env_workspace_user"] == IMAGE_DEFAULTS["image_build_workspace_user"]
    assert role_vars["env_workspace_uid"] == IMAGE_DEFAULTS["image_build_workspace_uid"]
    assert role_vars["env_workspace_root"] == IMAGE_DEFAULTS["image_build_workspace_root"]


def test_the_sync_script_copies_changed_files_only(tmp_path: Path) -> None:
    script = ROLE / "files" / "sync_projects.sh"
    dest = tmp_path / "tree"
    dest.mkdir()
    uid = str(Path(tmp_path).stat().st_uid)

    def sync() -> str:
        proc = subprocess.run(["sh", str(script), str(PROJECTS_DIR), str(dest), uid, *projects()],
                              capture_output=True, text=True, check=True)
        return proc.stdout

    first = sync()
    assert [line.split(":")[0] for line in first.splitlines()] == [f"updated {p}" for p in projects()]
    assert sync() == ""
    (dest / "ratelimit" / "go.mod").write_text("module broken\n")
    (dest / "ratelimit" / "bin").mkdir()
    (dest / "ratelimit" / "bin" / "limitcheck").write_text("build output\n")
    assert sync() == "updated ratelimit: 1 file(s)\n"
    assert (dest / "ratelimit" / "go.mod").read_text() == (PROJECTS_DIR / "ratelimit" / "go.mod").read_text()
    assert (dest / "ratelimit" / "bin" / "limitcheck").is_file()  # build output is left alone
    for project in projects():
        for src in (PROJECTS_DIR / project).rglob("*"):
            rel = src.relative_to(PROJECTS_DIR)
            if src.is_file() and not any(part in ("__pycache__", ".ruff_cache") for part in rel.parts):
                assert (dest / rel).read_bytes() == src.read_bytes(), rel


def test_the_sync_script_never_writes_through_a_symlink_in_the_tree(tmp_path: Path) -> None:
    """A directory of the tree replaced by a symlink (the workspace user can make one) does not lead the copy, which
    runs as root on the host, outside the tree."""
    script = ROLE / "files" / "sync_projects.sh"
    dest, outside = tmp_path / "tree", tmp_path / "outside"
    (dest / "ratelimit").mkdir(parents=True)
    outside.mkdir()
    (dest / "ratelimit" / "cmd").symlink_to(outside, target_is_directory=True)
    uid = str(tmp_path.stat().st_uid)
    proc = subprocess.run(["sh", str(script), str(PROJECTS_DIR), str(dest), uid, "ratelimit"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 3 and f"symlink {dest}/ratelimit/cmd" in proc.stderr, proc
    assert list(outside.iterdir()) == []
    # A file of the tree replaced by a symlink is replaced in turn, never written through.
    target = outside / "passwd"
    target.write_text("host file\n")
    (dest / "invoicer").mkdir()
    (dest / "invoicer" / "pyproject.toml").symlink_to(target)
    subprocess.run(["sh", str(script), str(PROJECTS_DIR), str(dest), uid, "invoicer"], capture_output=True, check=True)
    assert target.read_text() == "host file\n"
    copied = dest / "invoicer" / "pyproject.toml"
    assert not copied.is_symlink()
    assert copied.read_bytes() == (PROJECTS_DIR / "invoicer" / "pyproject.toml").read_bytes()
