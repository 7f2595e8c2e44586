"""The DevOps upstream projects: the catalogue's schema and rules, checksums, the all-or-nothing fetch, the check
step's limits and verdicts, measured.json, the CLI and the generated table.

The registries are faked without the network: a Go module proxy as files (GOPROXY=file://, the real `go` command),
a PyPI index as files (the real pip), and Maven as a fake client (a real `mvn` would need its plugins from Central).
The live fetch, build and test of every project is `make devops-projects`; one live sample is
tests/e2e/test_devops_projects_live.py.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import main as opsbench_main
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects import docs, fetch, run
from orchestrator.devops_projects.check import check_on_host
from orchestrator.devops_projects.fetch import Cache, StepFailed, fetch_project, go_h1, private_home, zip_bytes
from orchestrator.errors import OpsBenchError, SpecInvalid

TINY = "example.com/tiny"
TINY_FILES = {
    f"{TINY}@v1.0.0/go.mod": b"module example.com/tiny\n\ngo 1.19\n",
    f"{TINY}@v1.0.0/tiny.go": b"package tiny\n\nfunc Add(a, b int) int { return a + b }\n",
}
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="the fake module proxy is read by the real go "
                                                                 "command, which this machine lacks")


def raw_catalogue() -> dict[str, Any]:
    return dict(yaml.safe_load(cat.CATALOGUE.read_text()))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def project(raw_source: dict[str, Any], pid: str, language: str, **extra: Any) -> cat.Project:
    data = {"apiVersion": "opsbench/v1", "kind": "DevOpsProjects",
            "python_wheels": [{"name": "pytest", "version": "8.3.5", "sha256": "0" * 64}],
            "projects": [{"id": pid, "language": language, "summary": "s", "licence": "MIT", "source": raw_source,
                          **extra}]}
    return cat.parse(data, Path("test.yaml")).projects[0]


# -- the catalogue -------------------------------------------------------------------------------------------------

def test_the_catalogue_has_twelve_active_projects_three_per_language() -> None:
    catalogue = cat.load()
    active = [p for p in catalogue.projects if p.active]
    assert len(active) >= 12
    for language in ("go", "java", "python"):
        assert sum(p.language == language for p in active) >= 3, language
    assert all(p.licence and p.source.artifacts for p in catalogue.projects)


def test_every_active_project_has_measured_host_figures() -> None:
    measured = cat.load_measured()
    for p in cat.load().projects:
        if p.active:
            figures = measured.get(p.id, {}).get("host")
            assert figures, f"{p.id} has no measured host times: run `make devops-projects RECORD=1`"
            assert figures["passed"] > 0 and figures["failed"] == 0, p.id


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d["projects"][0]["source"].pop("sha256"), "$.projects[0].source"),
    (lambda d: d["projects"][0].update(id="Go Semver"), "$.projects[0].id"),
    (lambda d: d["projects"][0]["source"].update(h1="h1:short="), "$.projects[0].source"),
    (lambda d: d["projects"][0].update(surprise=1), "$.projects[0]"),
    (lambda d: d["projects"].insert(1, copy.deepcopy(d["projects"][0])), "$.projects[1].id"),
    (lambda d: d["projects"][0].update(id="python-semver"), "$.projects[0].id"),
])
def test_a_bad_catalogue_is_one_error_naming_the_file_and_path(change: Any, where: str) -> None:
    data = raw_catalogue()
    assert data["projects"][0]["language"] == "go"
    change(data)
    with pytest.raises(SpecInvalid) as err:
        cat.parse(data, Path("projects.yaml"))
    assert any(p.path == where for p in err.value.problems), err.value.problems
    assert "projects.yaml" in str(err.value)


def test_a_source_from_another_languages_registry_is_refused() -> None:
    data = raw_catalogue()
    data["projects"][0]["language"] = "python"
    data["projects"][0]["id"] = "python-semver"
    with pytest.raises(SpecInvalid, match="a python project comes from pypi"):
        cat.parse(data, Path("projects.yaml"))


def test_select_names_unknown_ids_and_keeps_dropped_ones_out_unless_named() -> None:
    catalogue = cat.load()
    with pytest.raises(OpsBenchError, match=r"unknown project.*go-nope.*the projects are"):
        catalogue.select(["go-nope"])
    dropped = [p for p in catalogue.projects if not p.active]
    assert dropped and all(p not in catalogue.select() for p in dropped)
    assert catalogue.select([dropped[0].id]) == [dropped[0]]


# -- checksums -----------------------------------------------------------------------------------------------------

def test_go_h1_is_the_go_sum_hash_of_a_module_zip(tmp_path: Path) -> None:
    zf = tmp_path / "m.zip"
    zf.write_bytes(zip_bytes(TINY_FILES))
    lines = "".join(f"{sha(data)}  {name}\n" for name, data in sorted(TINY_FILES.items()))
    import base64
    assert go_h1(zf) == "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def test_verify_names_the_file_and_both_hashes(tmp_path: Path) -> None:
    jar = tmp_path / "x-sources.jar"
    jar.write_bytes(b"not the pinned bytes")
    p = maven_project({"sources": "a" * 64, "test-sources": "b" * 64, "pom": "c" * 64})
    with pytest.raises(StepFailed) as err:
        fetch.verify(p, {"sources": jar, "test-sources": jar, "pom": jar})
    assert err.value.step == "verify" and err.value.project == "java-x"
    assert sha(b"not the pinned bytes") in str(err.value) and "a" * 64 in str(err.value)
    assert "x-sources.jar" in str(err.value)


# -- Go through a fake module proxy (files, the real go command) -----------------------------------------------------

def fake_proxy(root: Path) -> Path:
    at = root / "proxy" / TINY / "@v"
    if at.is_dir():
        return root / "proxy"
    at.mkdir(parents=True)
    (at / "v1.0.0.zip").write_bytes(zip_bytes(TINY_FILES))
    (at / "v1.0.0.mod").write_bytes(TINY_FILES[f"{TINY}@v1.0.0/go.mod"])
    (at / "v1.0.0.info").write_text('{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}')
    (at / "list").write_text("v1.0.0\n")
    return root / "proxy"


def go_project(version: str = "v1.0.0", zip_sha: str | None = None, h1: str | None = None) -> cat.Project:
    zipped = zip_bytes(TINY_FILES)
    if h1 is None:
        lines = "".join(f"{sha(data)}  {name}\n" for name, data in sorted(TINY_FILES.items()))
        import base64
        h1 = "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()
    return project({"registry": "go-proxy", "module": TINY, "version": version, "h1": h1,
                    "sha256": zip_sha or sha(zipped)}, "go-tiny", "go")


def go_env(tmp_path: Path) -> dict[str, str]:
    return {"GOPROXY": f"file://{fake_proxy(tmp_path)}", "GOSUMDB": "off", "GOFLAGS": "-modcacherw"}


def leftovers(cache: Cache) -> list[str]:
    return sorted(p.name for p in cache.src.iterdir()) if cache.src.exists() else []


@needs_go
def test_a_go_module_is_fetched_verified_and_unpacked_with_the_contract(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    done = fetch_project(go_project(), cache, env=go_env(tmp_path))
    tree = cache.tree(go_project())
    assert done["fetched"] and not done["cached"]
    assert (tree / "tiny.go").read_bytes() == TINY_FILES[f"{TINY}@v1.0.0/tiny.go"]
    assert (tree / "opsbench.mk").is_file() and cache.fetched(go_project())
    assert json.loads((tree / fetch.FETCHED).read_text())["h1"] == go_project().source.h1
    assert leftovers(cache) == ["go-tiny"]  # no staging folder left
    (tree / "opsbench.mk").write_text("check:\n\techo an older contract\n")
    assert fetch_project(go_project(), cache, env=go_env(tmp_path))["cached"] is True
    assert (tree / "opsbench.mk").read_bytes() == (fetch.CONTRACT_DIR / "go.mk").read_bytes()


@needs_go
def test_a_tree_fetched_at_other_pins_is_fetched_again(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    fetch_project(go_project(), cache, env=go_env(tmp_path))
    (cache.tree(go_project()) / "stale.go").write_text("package tiny\n")
    record = json.loads((cache.tree(go_project()) / fetch.FETCHED).read_text())
    record["coordinates"] = f"{TINY}@v0.9.0"
    (cache.tree(go_project()) / fetch.FETCHED).write_text(json.dumps(record))
    assert not cache.fetched(go_project())
    assert fetch_project(go_project(), cache, env=go_env(tmp_path))["cached"] is False
    assert not (cache.tree(go_project()) / "stale.go").exists() and cache.fetched(go_project())


@needs_go
def test_a_version_the_proxy_refuses_fails_at_fetch_and_leaves_nothing(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    with pytest.raises(StepFailed) as err:
        fetch_project(go_project("v9.9.9"), cache, env=go_env(tmp_path))
    assert err.value.step == "fetch" and "refused example.com/tiny@v9.9.9" in str(err.value)
    assert str(err.value).startswith("project go-tiny, step fetch:")
    assert leftovers(cache) == []


@needs_go
@pytest.mark.parametrize(("kwargs", "what"), [({"zip_sha": "0" * 64}, "checksum mismatch for the zip"),
                                              ({"h1": "h1:" + "A" * 43 + "="}, "go.sum hash mismatch")])
def test_a_checksum_mismatch_fails_at_verify_and_leaves_nothing(tmp_path: Path, kwargs: dict[str, str],
                                                                what: str) -> None:
    cache = Cache(tmp_path / "cache")
    with pytest.raises(StepFailed, match=what) as err:
        fetch_project(go_project(**kwargs), cache, env=go_env(tmp_path))
    assert err.value.step == "verify"
    assert leftovers(cache) == []


def test_an_archive_member_outside_the_tree_is_refused(tmp_path: Path) -> None:
    bad = {f"{TINY}@v1.0.0/../../escape.go": b"package x\n"}
    zf = tmp_path / "m.zip"
    zf.write_bytes(zip_bytes(bad))
    with pytest.raises(StepFailed, match="outside the project tree"):
        fetch.unpack_go(go_project(), {"zip": zf}, tmp_path / "tree")
    assert not (tmp_path / "escape.go").exists()


# -- PyPI through a fake index (files, the real pip) -----------------------------------------------------------------

def fake_index(root: Path) -> tuple[str, bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"[build-system]\nrequires = []\n"
        info = tarfile.TarInfo("tiny-1.0/pyproject.toml")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    sdist = buf.getvalue()
    folder = root / "simple" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tiny-1.0.tar.gz").write_bytes(sdist)
    (folder / "index.html").write_text('<html><body><a href="tiny-1.0.tar.gz">tiny-1.0.tar.gz</a></body></html>')
    return f"file://{root / 'simple'}", sdist


@pytest.mark.parametrize(("version", "pin", "step", "what"), [
    ("2.0", None, "fetch", "PyPI refused tiny==2.0"),
    ("1.0", "0" * 64, "verify", "does not have the pinned sha256"),
])
def test_pypi_refusals_and_mismatches_name_the_step_and_leave_nothing(tmp_path: Path, version: str,
                                                                      pin: str | None, step: str, what: str) -> None:
    index, sdist = fake_index(tmp_path)
    p = project({"registry": "pypi", "name": "tiny", "version": version, "sha256": pin or sha(sdist)},
                "python-tiny", "python")
    cache = Cache(tmp_path / "cache")
    with pytest.raises(StepFailed, match=what) as err:
        fetch_project(p, cache, env={"OPSBENCH_PIP_INDEX": index})
    assert err.value.step == step
    assert leftovers(cache) == []


# -- Maven through a fake client ------------------------------------------------------------------------------------

JARS = {
    "sources": zip_bytes({"org/x/X.java": b"package org.x; class X {}", "org/x/x.properties": b"a=1",
                          "META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\n"}),
    "test-sources": zip_bytes({"org/x/XTest.java": b"package org.x; class XTest {}",
                               "org/x/jmh_generated/X_jmhTest.java": b"generated",
                               "org/x/data.txt": b"fixture",
                               "META-INF/services/org.x.Handler": b"org.x.XHandler\n",
                               "META-INF/maven/org.x/x/pom.xml": b"<project/>", "META-INF/LICENSE.txt": b"AL"}),
    "pom": b"<project/>",
}


def maven_project(sums: dict[str, str] | None = None) -> cat.Project:
    return project({"registry": "maven-central", "group": "org.x", "artifact": "x", "version": "1.0",
                    "sha256": sums or {role: sha(data) for role, data in JARS.items()}}, "java-x", "java")


def fake_maven(p: cat.Project, into: Path, ctx: fetch.FetchContext) -> dict[str, Path]:
    out = {}
    for role, data in JARS.items():
        out[role] = into / f"x-1.0-{role}"
        out[role].write_bytes(data)
    return out


def test_maven_jars_become_a_maven_tree(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    primed: list[Path] = []
    fetch_project(maven_project(), cache, clients={"maven-central": fake_maven},
                  prime=lambda p, tree, c: primed.append(tree))
    tree = cache.tree(maven_project())
    files = sorted(str(f.relative_to(tree)) for f in tree.rglob("*") if f.is_file())
    assert files == [".opsbench-fetch.json", "opsbench.mk", "pom.xml", "src/main/java/org/x/X.java",
                     "src/main/resources/org/x/x.properties", "src/test/java/org/x/XTest.java",
                     "src/test/resources/META-INF/services/org.x.Handler", "src/test/resources/org/x/data.txt"]
    assert len(primed) == 1 and primed[0] != tree  # primed while staged, before the move


def test_a_refusing_registry_and_a_failing_prime_leave_nothing(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")

    def refuse(p: cat.Project, into: Path, ctx: fetch.FetchContext) -> dict[str, Path]:
        (into / "partial.jar").write_bytes(b"half")
        raise StepFailed(p.id, "fetch", "Maven Central refused org.x:x:1.0:jar:sources")

    def bad_prime(p: cat.Project, tree: Path, c: Cache) -> None:
        raise StepFailed(p.id, "deps", "a plugin did not resolve")

    with pytest.raises(StepFailed, match="step fetch: Maven Central refused"):
        fetch_project(maven_project(), cache, clients={"maven-central": refuse})
    with pytest.raises(StepFailed, match="step deps"):
        fetch_project(maven_project(), cache, clients={"maven-central": fake_maven}, prime=bad_prime)
    assert leftovers(cache) == []


# -- the check step -------------------------------------------------------------------------------------------------

def staged_tree(cache: Cache, p: cat.Project, makefile: str) -> None:
    tree = cache.tree(p)
    tree.mkdir(parents=True)
    (tree / "opsbench.mk").write_text(makefile)
    (tree / fetch.FETCHED).write_text(json.dumps(fetch.fetch_record(p)))


def limited_go_project(build_s: int = 600, test_s: int = 900) -> cat.Project:
    return project({"registry": "go-proxy", "module": TINY, "version": "v1.0.0", "h1": "h1:" + "A" * 43 + "=",
                    "sha256": "0" * 64}, "go-tiny", "go", limits={"build_s": build_s, "test_s": test_s})


def test_a_build_over_its_limit_is_killed_and_named(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    p = limited_go_project(build_s=1)
    staged_tree(cache, p, "build:\n\tsleep 30\ncheck:\n\ttrue\n")
    with pytest.raises(StepFailed, match=r"step build: .*exceeded its time limit of 1 s"):
        check_on_host(p, cache)


def test_failing_tests_before_any_change_fail_the_test_step(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    p = limited_go_project()
    staged_tree(cache, p, "build:\n\ttrue\ncheck:\n\tprintf -- '--- PASS: TestA\\n--- FAIL: TestB\\n' "
                          "> test-report.txt\n")
    with pytest.raises(StepFailed, match=r"step test: 1 test\(s\) failed, 1 passed before any change"):
        check_on_host(p, cache)


def test_a_check_that_exits_non_zero_with_a_clean_partial_report_fails(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    p = limited_go_project()
    staged_tree(cache, p, "build:\n\ttrue\ncheck:\n\tprintf -- '--- PASS: TestA\\n' > test-report.txt; "
                          "echo 'Java heap space'; exit 1\n")
    with pytest.raises(StepFailed, match=r"step test: `make check` exited 2 though its report counts 1 passed "
                                         r"and no failure .*Java heap space"):
        check_on_host(p, cache)


def test_a_passing_check_is_timed_and_counted_on_a_copy(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    p = limited_go_project()
    staged_tree(cache, p, "build:\n\ttouch built\ncheck:\n\tprintf -- '--- PASS: TestA\\n--- PASS: TestB\\n' "
                          "> test-report.txt\n")
    result = check_on_host(p, cache)
    assert (result.built, result.tests_passed, result.passed, result.failed) == (True, True, 2, 0)
    assert result.where == "host" and result.build_s >= 0
    assert not (cache.tree(p) / "built").exists()  # the cached tree stays pristine


def test_a_build_that_exits_non_zero_names_its_output(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    p = limited_go_project()
    staged_tree(cache, p, "build:\n\techo 'undefined: frobnicate'; exit 3\ncheck:\n\ttrue\n")
    with pytest.raises(StepFailed, match=r"step build: `make build` exited 2: .*undefined: frobnicate"):
        check_on_host(p, cache)


# -- the run, measured.json, the CLI and the docs ----------------------------------------------------------------------

def test_a_failing_project_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    catalogue = cat.load()
    ids = tuple(p.id for p in catalogue.projects if p.active and p.language == "go")[:2]
    cache = Cache(tmp_path / "cache")
    for p in catalogue.select(ids):
        staged_tree(cache, p, "")

    def checker(p: cat.Project, c: Cache) -> Any:
        if p.id == ids[0]:
            raise StepFailed(p.id, "test", "2 test(s) failed")
        from orchestrator.devops_projects.check import CheckResult
        return CheckResult("host", True, True, 1.0, 2.0, 5, 0, "go version test")

    reports = run.run_projects(ids, fetch=False, check="host", cache=cache, catalogue=catalogue, checker=checker)
    assert reports[0].error == {"step": "test", "message": f"project {ids[0]}, step test: 2 test(s) failed"}
    assert reports[1].error is None and reports[1].check and reports[1].check["passed"] == 5
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({ids[0]: {"host": {"build_s": 9}}}))
    import datetime as dt
    assert run.record(reports, "host", measured, today=dt.date(2026, 11, 27)) == [ids[1]]
    data = json.loads(measured.read_text())
    assert data[ids[0]] == {"host": {"build_s": 9}}  # a failure keeps the last good figures
    assert data[ids[1]]["host"]["test_s"] == 2.0 and data[ids[1]]["host"]["date"] == "2026-11-27"


def test_not_fetched_projects_fail_at_fetch_without_the_network(tmp_path: Path) -> None:
    catalogue = cat.load()
    pid = catalogue.select()[0].id
    reports = run.run_projects((pid,), fetch=False, check="host", cache=Cache(tmp_path), catalogue=catalogue)
    assert reports[0].error and reports[0].error["step"] == "fetch" and "add --fetch" in reports[0].error["message"]


def test_cli_lists_the_catalogue_and_refuses_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(opsbench_main, ["devops", "projects", "--json", "--cache", str(tmp_path)])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert {r["id"] for r in rows} == {p.id for p in cat.load().select()}
    assert not any(r["fetched"] for r in rows)
    bad = runner.invoke(opsbench_main, ["devops", "projects", "go-nope", "--cache", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown project(s) go-nope" in bad.output
    usage = runner.invoke(opsbench_main, ["devops", "projects", "--record", "--cache", str(tmp_path)])
    assert usage.exit_code == 2 and "--record" in usage.output
    failed = runner.invoke(opsbench_main, ["devops", "projects", "--check", "host", "--json", "--cache",
                                           str(tmp_path), rows[0]["id"]])
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["projects"][0]["error"]["step"] == "fetch"


def test_the_generated_table_lists_every_project_and_every_drop_reason() -> None:
    text = docs.render()
    for p in cat.load().projects:
        assert f"`{p.source.coordinates}`" in text
        if not p.active:
            assert p.dropped in text


def test_contract_meta_has_the_shape_evaluate_workspace_reads() -> None:
    from orchestrator.evaluation.workspace import load_projects
    shipped = next(iter(load_projects().values()))
    for p in cat.load().select():
        meta = run.contract_meta(p, tests=3)
        assert set(meta) == set(shipped), p.id
        assert meta["check"] == "make -s -f opsbench.mk check" and "opsbench.mk" in meta["protected"]


def test_low_priority_is_applied_to_every_client_command(tmp_path: Path) -> None:
    proc = fetch.run_limited(["sh", "-c", "cat /proc/self/stat"], cwd=tmp_path, timeout=10, project="p", step="s")
    nice = int(proc.stdout.rsplit(")", 1)[1].split()[16])
    assert nice == 19 or os.nice(0) == 19


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go toolchain (make setup installs it)")
def test_go_in_a_private_home_leaves_no_telemetry_writer_behind(tmp_path: Path) -> None:
    """Go's default telemetry spawns a child that writes under $HOME after `go` exits; a scratch directory
    removed at that moment failed with 'Directory not empty' (CI, 2026-11-28). The private HOME turns it off."""
    home = private_home(tmp_path / "home")
    env = {**os.environ, "HOME": str(home), "GOPATH": str(home / "go")}
    subprocess.run(["go", "version"], env=env, check=True, capture_output=True)
    time.sleep(1.5)  # the child, when there is one, writes its counters within a second
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert written == [".config/go/telemetry/mode"]
