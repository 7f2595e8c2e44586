"""Fetch a project through its own registry's ordinary client, verify every file against the catalogue's pins, and
lay out its source tree in the cache, all or nothing.

Each registry has one client (`go mod download`, `mvn dependency:get`, `pip download --require-hashes`) that puts the
registry's files in a folder; everything after that (sha256 and go.sum checks, unpacking with no path leaving the
tree, the check contract's Makefile) is ours and the same for all. Work happens in a staging folder beside the
final one, renamed into place only when every step passed: an error of any step removes it, so the cache never
holds a half-fetched project. Every error is a `StepFailed` naming the project and the step.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.devops_projects.catalogue import Project, Wheel
from orchestrator.errors import OpsBenchError

CONTRACT_DIR = Path(__file__).resolve().parent / "contract"
CONTRACT_FILE = "opsbench.mk"
"""The check contract's Makefile, written beside the sources (an upstream Makefile, if any, stays untouched):
`make -s -f opsbench.mk build` then `make -s -f opsbench.mk check DEPS=<deps dir>`."""
FETCHED = ".opsbench-fetch.json"
"""Written last into a fetched tree: what was fetched and verified. A tree without it is not a fetched project."""
LOW_PRIORITY = ["nice", "-n", "19", "ionice", "-c3"] if shutil.which("ionice") else ["nice", "-n", "19"]
OUTPUT_TAIL = 1500


class StepFailed(OpsBenchError):
    """One project failed at one step (fetch, verify, unpack, deps, build, test): the message names both."""

    def __init__(self, project: str, step: str, message: str) -> None:
        self.project, self.step, self.detail = project, step, message
        super().__init__(f"project {project}, step {step}: {message}")


@dataclass(frozen=True)
class Cache:
    """The cache's layout: `src/<id>` the fetched trees, `deps/m2` the Maven repository, `deps/wheels` the Python
    wheels (`deps` is what a build mounts or bakes as its offline registry caches)."""

    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def deps(self) -> Path:
        return self.root / "deps"

    def tree(self, project: Project) -> Path:
        return self.src / project.id

    def fetched(self, project: Project) -> bool:
        """Whether the cache holds this project at the catalogue's current pins (a tree fetched at other pins, or
        half-written, is not it and is fetched again)."""
        try:
            return bool(json.loads((self.tree(project) / FETCHED).read_text()) == fetch_record(project))
        except (OSError, ValueError):
            return False


# -- running the clients -------------------------------------------------------------------------------------------

def private_home(home: Path) -> Path:
    """A private HOME for a project's toolchains, created with Go's telemetry off: left on (the default, "local"),
    `go` leaves a detached child writing under $HOME/.config after it exits, which races the removal of a scratch
    directory holding that HOME."""
    telemetry = home / ".config" / "go" / "telemetry"
    telemetry.mkdir(parents=True, exist_ok=True)
    (telemetry / "mode").write_text("off\n")
    return home


def run_limited(argv: list[str], *, cwd: Path, timeout: float, env: Mapping[str, str | None] | None = None,
                project: str, step: str) -> subprocess.CompletedProcess[str]:
    """`argv` at the lowest CPU and I/O priority, killed with everything it started after `timeout` seconds (a
    `StepFailed` saying so); a missing program is a `StepFailed` too. `env` adds to the environment (None
    removes a variable). Output is returned, not checked."""
    merged: dict[str, str | None] = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in merged.items() if v is not None}
    try:
        proc = subprocess.Popen([*LOW_PRIORITY, *argv], cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    except FileNotFoundError as exc:
        raise StepFailed(project, step, f"cannot run {argv[0]}: {exc.strerror}") from None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise StepFailed(project, step, f"`{' '.join(argv[:3])} ...` exceeded its time limit of {timeout:g} s "
                                        "and was killed") from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


MAVEN_BOILERPLATE = ("[ERROR] To see the full", "[ERROR] Re-run Maven", "[ERROR] For more information",
                     "[ERROR] [Help", "[ERROR] -> [Help")


def _tail(text: str) -> str:
    """What a failed client said, in one line: Maven's first real [ERROR] lines (its last ones are always the same
    advice), else the output's last lines."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ERROR]") and line.strip() != "[ERROR]"
              and not line.startswith(MAVEN_BOILERPLATE)]
    return " | ".join(errors[:3] if errors else lines[-6:])[-OUTPUT_TAIL:]


Client = Callable[[Project, Path, "FetchContext"], dict[str, Path]]
"""A registry client: downloads `project`'s artifacts into the given folder, returns role -> file. It raises
`StepFailed` (step `fetch`) when the registry refuses."""


@dataclass
class FetchContext:
    cache: Cache
    timeout: float
    env: dict[str, str]
    go_sum: str = ""  # the h1 the go command reported, checked in `verify`


def go_proxy(project: Project, into: Path, ctx: FetchContext) -> dict[str, Path]:
    """`go mod download -json module@version` into a module cache private to this fetch (the proxy's zip and the
    go command's own h1 of it)."""
    env = {"GOMODCACHE": str(into / "gomod"), "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local", **ctx.env}
    proc = run_limited(["go", "mod", "download", "-json", project.source.coordinates], cwd=into,
                       timeout=ctx.timeout, env=env, project=project.id, step="fetch")
    try:
        info = json.loads(proc.stdout[proc.stdout.find("{"):]) if "{" in proc.stdout else {}
    except ValueError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Zip"):
        why = info.get("Error") or _tail(proc.stdout)
        raise StepFailed(project.id, "fetch", f"the Go module proxy refused {project.source.coordinates}: {why}")
    ctx.go_sum = str(info.get("Sum", ""))
    return {"zip": Path(info["Zip"])}


MAVEN_FILES = {"sources": ("jar", "sources"), "test-sources": ("jar", "test-sources"), "pom": ("pom", "")}


def maven_central(project: Project, into: Path, ctx: FetchContext) -> dict[str, Path]:
    """`mvn dependency:get` of the sources jar, test-sources jar and pom into the cache's Maven repository, then
    copied into `into` (the repository is shared with the offline builds; the copies are what gets verified)."""
    group, artifact, version = project.source.coordinates.split(":")
    repo = ctx.cache.deps / "m2"
    found: dict[str, Path] = {}
    for role, (kind, classifier) in MAVEN_FILES.items():
        coords = f"{group}:{artifact}:{version}:{kind}" + (f":{classifier}" if classifier else "")
        argv = ["mvn", "-B", "-q", f"-Dmaven.repo.local={repo}", "dependency:get", "-Dtransitive=false",
                f"-Dartifact={coords}", *ctx.env.get("OPSBENCH_MVN_ARGS", "").split()]
        proc = run_limited(argv, cwd=into, timeout=ctx.timeout, project=project.id, step="fetch")
        name = f"{artifact}-{version}" + (f"-{classifier}" if classifier else "") + f".{kind}"
        file = repo.joinpath(*group.split("."), artifact, version, name)
        if proc.returncode != 0 or not file.is_file():
            errors = [line for line in proc.stdout.splitlines() if "ERROR" in line][:2]
            raise StepFailed(project.id, "fetch", f"Maven Central refused {coords}: "
                                                  f"{_tail(chr(10).join(errors) or proc.stdout)}")
        found[role] = Path(shutil.copy2(file, into / name))
    return found


def _requirements(into: Path, lines: list[str]) -> Path:
    req = into / "requirements-pinned.txt"
    req.write_text("".join(f"{line}\n" for line in lines))
    return req


def pypi(project: Project, into: Path, ctx: FetchContext) -> dict[str, Path]:
    """`pip download --no-deps --no-binary :all: --require-hashes` of the sdist: pip itself refuses a file whose
    hash is not the pinned one (our own check follows)."""
    dest = into / "sdist"
    dest.mkdir()
    req = _requirements(into, [f"{project.source.coordinates} --hash=sha256:{project.source.artifacts[0].sha256}"])
    proc = run_limited([*_pip(ctx), "--no-deps", "--no-binary", ":all:", "--require-hashes", "-r",
                        str(req), "-d", str(dest)], cwd=into, timeout=ctx.timeout, project=project.id, step="fetch")
    files = sorted(dest.iterdir())
    if proc.returncode != 0 or len(files) != 1:
        if "DO NOT MATCH THE HASHES" in proc.stdout:
            raise StepFailed(project.id, "verify", f"pip: the sdist of {project.source.coordinates} does not have "
                                                   f"the pinned sha256: {_tail(proc.stdout)}")
        raise StepFailed(project.id, "fetch", f"PyPI refused {project.source.coordinates}: {_tail(proc.stdout)}")
    return {"sdist": files[0]}


def _pip(ctx: FetchContext) -> list[str]:
    """`python3 -m pip download`; OPSBENCH_PIP_INDEX (the tests' fake index) replaces the configured index."""
    argv = ["python3", "-m", "pip", "--disable-pip-version-check", "--no-input"]
    if ctx.env.get("OPSBENCH_PIP_INDEX"):
        return [*argv, "--isolated", "download", "--index-url", ctx.env["OPSBENCH_PIP_INDEX"]]
    return [*argv, "download"]


CLIENTS: dict[str, Client] = {"go-proxy": go_proxy, "maven-central": maven_central, "pypi": pypi}


# -- verifying and unpacking ---------------------------------------------------------------------------------------

def sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def go_h1(zip_file: Path) -> str:
    """The go.sum hash (dirhash Hash1) of a module zip: sha256 over the sorted "<sha256>  <name>\\n" lines."""
    lines = []
    with zipfile.ZipFile(zip_file) as zf:
        for name in sorted(i.filename for i in zf.infolist() if not i.is_dir()):
            lines.append(f"{hashlib.sha256(zf.read(name)).hexdigest()}  {name}\n")
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()


def verify(project: Project, files: dict[str, Path], reported_h1: str = "") -> None:
    """Every artifact has its pinned sha256 (and a Go zip its pinned h1, computed here, and the go command's
    agrees); the first mismatch is a `StepFailed` naming the file and both hashes."""
    for art in project.source.artifacts:
        got = sha256(files[art.role])
        if got != art.sha256:
            raise StepFailed(project.id, "verify", f"checksum mismatch for the {art.role} "
                                                   f"({files[art.role].name}): sha256 {got}, pinned {art.sha256}")
    if project.source.registry == "go-proxy":
        h1 = go_h1(files["zip"])
        for what, value in (("the zip", h1), ("the go command", reported_h1 or h1)):
            if value != project.source.h1:
                raise StepFailed(project.id, "verify", f"go.sum hash mismatch ({what}): {value}, "
                                                       f"pinned {project.source.h1}")


def _safe(rel: str, project: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise StepFailed(project, "unpack", f"archive member {rel!r} would land outside the project tree")
    return path


def _write(tree: Path, rel: PurePosixPath, data: bytes, mode: int = 0o644) -> None:
    dest = tree.joinpath(*rel.parts)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    dest.chmod(mode)


def unpack_go(project: Project, files: dict[str, Path], tree: Path) -> None:
    prefix = project.source.coordinates + "/"
    with zipfile.ZipFile(files["zip"]) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            if not info.filename.startswith(prefix):
                raise StepFailed(project.id, "unpack", f"zip member {info.filename!r} is not under {prefix}")
            _write(tree, _safe(info.filename[len(prefix):], project.id), zf.read(info))


GENERATED_PARTS = {"jmh_generated"}
"""Folders of generated code some sources jars carry (JMH's benchmark stubs): the build generates them again, and
javac refuses a second copy."""


def _packaging_file(rel: PurePosixPath) -> bool:
    """What the jar's packaging added to META-INF (the manifest, the pom copy, the licence and notice files), not
    a resource of the project; META-INF/services and the like are resources and stay."""
    if rel.parts[0] != "META-INF":
        return False
    return len(rel.parts) == 2 or rel.parts[1] == "maven"


def unpack_maven(project: Project, files: dict[str, Path], tree: Path) -> None:
    """The Maven layout from the jars: `.java` files under src/<main|test>/java, every other file (but what the
    jar's packaging added and generated code) under src/<main|test>/resources; the pom as pom.xml."""
    for role, scope in (("sources", "main"), ("test-sources", "test")):
        with zipfile.ZipFile(files[role]) as zf:
            for info in zf.infolist():
                rel = _safe(info.filename, project.id)
                if info.is_dir() or _packaging_file(rel) or GENERATED_PARTS & set(rel.parts):
                    continue
                kind = "java" if rel.suffix == ".java" else "resources"
                _write(tree, PurePosixPath("src", scope, kind, *rel.parts), zf.read(info))
    shutil.copyfile(files["pom"], tree / "pom.xml")


def unpack_sdist(project: Project, files: dict[str, Path], tree: Path) -> None:
    """The sdist's one top folder becomes the tree (files only, no links or devices)."""
    with tarfile.open(files["sdist"]) as tf:
        members = [m for m in tf.getmembers() if m.isfile()]
        tops = {PurePosixPath(m.name).parts[0] for m in members}
        if len(tops) != 1:
            raise StepFailed(project.id, "unpack", f"the sdist has {len(tops)} top folders, expected one")
        for member in members:
            rel = _safe(member.name, project.id)
            fh = tf.extractfile(member)
            data = fh.read() if fh else b""
            _write(tree, PurePosixPath(*rel.parts[1:]), data, 0o755 if member.mode & 0o100 else 0o644)


UNPACK: dict[str, Callable[[Project, dict[str, Path], Path], None]] = {
    "go-proxy": unpack_go, "maven-central": unpack_maven, "pypi": unpack_sdist}


@contextmanager
def staging(parent: Path, name: str) -> Iterator[Path]:
    """A fresh folder in `parent` that is removed on leaving, whatever happened (the caller renames what it keeps
    out of it first)."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".staging-{name}-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ensure_contract(project: Project, tree: Path) -> None:
    """The check contract's current Makefile in `tree`: ours, not fetched, so a change to it reaches trees fetched
    before without fetching them again."""
    source = CONTRACT_DIR / f"{project.language}.mk"
    target = tree / CONTRACT_FILE
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)


def fetch_record(project: Project) -> dict[str, object]:
    """What FETCHED holds: the pins the tree was verified against."""
    return {"id": project.id, "registry": project.source.registry, "coordinates": project.source.coordinates,
            "sha256": {a.role: a.sha256 for a in project.source.artifacts}, "h1": project.source.h1}


def fetch_project(project: Project, cache: Cache, *, clients: Mapping[str, Client] = CLIENTS,
                  env: Mapping[str, str] | None = None, prime: Callable[[Project, Path, Cache], None] | None = None,
                  ) -> dict[str, object]:
    """Fetch, verify and unpack `project` into `cache.tree(project)`, replacing nothing that is already fetched;
    `prime` (the deps step: resolve the build's own dependencies while the network is there) runs on the staged
    tree before it is moved into place. Returns what was done and how long it took."""
    if cache.fetched(project):
        ensure_contract(project, cache.tree(project))
        return {"fetched": True, "cached": True, "fetch_s": 0.0}
    started = time.monotonic()
    with staging(cache.src, project.id) as stage:
        downloads, tree = stage / "downloads", stage / "tree"
        downloads.mkdir()
        tree.mkdir()
        ctx = FetchContext(cache, project.limits.fetch_s, dict(env or {}))
        files = clients[project.source.registry](project, downloads, ctx)
        verify(project, files, ctx.go_sum)
        UNPACK[project.source.registry](project, files, tree)
        ensure_contract(project, tree)
        if prime is not None:
            prime(project, tree, cache)
        (tree / FETCHED).write_text(json.dumps(fetch_record(project), indent=2, sort_keys=True) + "\n")
        final = cache.tree(project)
        if final.exists():  # fetched at other pins, or no FETCHED mark (half-written, hand-made)
            shutil.rmtree(final)
        tree.rename(final)
    return {"fetched": True, "cached": False, "fetch_s": round(time.monotonic() - started, 1)}


# -- the offline caches the builds read ----------------------------------------------------------------------------

def fetch_wheels(wheels: tuple[Wheel, ...], cache: Cache, *, timeout: float = 300,
                 env: Mapping[str, str] | None = None) -> Path:
    """The Python projects' build backends and test runner into deps/wheels, pip checking every pinned hash;
    staged and renamed like a project (a failed download leaves the previous folder, or none)."""
    final = cache.deps / "wheels"
    stamp = hashlib.sha256(json.dumps([w.__dict__ for w in wheels], sort_keys=True).encode()).hexdigest()
    if (final / ".pins").is_file() and (final / ".pins").read_text() == stamp:
        return final
    ctx = FetchContext(cache, timeout, dict(env or {}))
    with staging(cache.deps, "wheels") as stage:
        req = _requirements(stage, [f"{w.name}=={w.version} --hash=sha256:{w.sha256}" for w in wheels])
        dest = stage / "wheels"
        proc = run_limited([*_pip(ctx), "--no-deps", "--only-binary", ":all:", "--require-hashes",
                            "-r", str(req), "-d", str(dest)], cwd=stage, timeout=timeout, project="python-wheels",
                           step="fetch")
        if proc.returncode != 0:
            step = "verify" if "DO NOT MATCH THE HASHES" in proc.stdout else "fetch"
            raise StepFailed("python-wheels", step, f"pip download of the pinned wheels: {_tail(proc.stdout)}")
        (dest / ".pins").write_text(stamp)
        if final.exists():
            shutil.rmtree(final)
        dest.rename(final)
    return final


def prime_maven(project: Project, tree: Path, cache: Cache) -> None:
    """Resolve every plugin and dependency the offline build and test need into deps/m2 (online, once) by running
    the build through its tests: surefire resolves its test-framework provider only when it runs tests (a filter
    that matches none resolves nothing), so nothing short of a test run fills the repository. Test failures are
    ignored here (the offline check judges them); the build output is removed again."""
    argv = ["mvn", "-B", "-q", f"-Dmaven.repo.local={cache.deps / 'm2'}", "-Drat.skip=true",
            "-Dmaven.test.failure.ignore=true", "test"]
    proc = run_limited(argv, cwd=tree, timeout=project.limits.build_s + project.limits.test_s, project=project.id,
                       step="deps")
    shutil.rmtree(tree / "target", ignore_errors=True)
    if proc.returncode != 0:
        raise StepFailed(project.id, "deps", f"resolving the Maven build's plugins and dependencies failed: "
                                             f"{_tail(proc.stdout)}")


def prime_for(project: Project) -> Callable[[Project, Path, Cache], None] | None:
    return prime_maven if project.language == "java" else None


def read_fetched(tree: Path) -> dict[str, object]:
    return dict(json.loads((tree / FETCHED).read_text()))


def zip_bytes(entries: Mapping[str, bytes]) -> bytes:
    """A zip of `entries` (name -> bytes), the same bytes every time (fixed dates): the tests' fake registries
    build module zips and jars with it and pin their checksums."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()

