"""Mutations of a project's own code: an operator swapped, a boundary moved by one, a branch removed, two arguments
swapped (and for Java also a negated condition, a removed statement, swapped operands). Python is read with the `ast`
module; Go with go/ast through a small Go program (`gomutate/`, built once into the cache); Java with JavaParser
through a small Java program (`javamutate/`, compiled once into the cache against JavaParser's jar, fetched from
Maven Central by `mvn dependency:get` and checked against its pinned sha256; every Java mutant it lists parses). A
mutation is an exact edit ``{path, old, new}`` (the shape `fault_workspace_edit` and `evaluate_workspace` apply),
`old` grown line by line until it occurs once in its file.

Candidates are listed in a fixed order (file, line, column, kind, replacement), so a seed draws the same ones on any
machine. Whether a mutant compiles, and which tests it fails, is for the generator to find out by running them.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.errors import OpsBenchError

GOMUTATE_DIR = Path(__file__).resolve().parent / "gomutate"
JAVAMUTATE_DIR = Path(__file__).resolve().parent / "javamutate"
JAVAPARSER = ("com.github.javaparser", "javaparser-core", "3.28.2",
              "b5499a3b1c40b16c0671fabe478c9aafeab38160c6fde74a6c13f42d86716ecd")
"""JavaParser (Apache-2.0 / LGPL-3.0) on Maven Central: group, artifact, version, the jar's sha256."""
KINDS = ("operator", "boundary", "branch", "arguments", "condition", "statement", "operands")
"""operator: an operator swapped (`<` -> `<=`, `+` -> `-`, `&&` -> `||`, `++` -> `--`, `!` dropped, a returned
boolean flipped); boundary: an integer compared against moved by one; branch: an if without else emptied;
arguments: a call's first two arguments swapped; condition (Java): an if/while/?: condition negated; statement
(Java): a call, ++/-- or compound assignment statement removed; operands (Java): the operands of `<`, `-`, `/` ...
swapped."""


@dataclass(frozen=True)
class Mutation:
    """One mutant: `path` (relative to the project), the 1-based `line` and 0-based byte `column` of the change,
    `kind` (one of KINDS), `before`/`after` the exact text changed, `function` the enclosing function (ground truth
    only: the agent never sees it)."""

    path: str
    line: int
    column: int
    kind: str
    before: str
    after: str
    function: str

    @property
    def key(self) -> tuple[str, int, int, str, str]:
        return (self.path, self.line, self.column, self.kind, self.after)

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.before.strip()!r} -> {self.after.strip()!r}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def unique_edit(text: str, start: int, end: int, replacement: str, path: str) -> dict[str, str]:
    """The edit replacing text[start:end] (character offsets) by `replacement`, its `old` the whole lines around
    the span, grown a line at a time (above, then below) until it occurs exactly once in `text` and its `new` once
    in the result (so the reverse edit, which restores the original, is exact too)."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    hi = len(text) if hi < 0 else hi + 1
    while True:
        old = text[lo:hi]
        new = text[lo:start] + replacement + text[end:hi]
        result = text[:lo] + new + text[hi:]
        if text.count(old) == 1 and new and result.count(new) == 1:
            break
        if lo == 0 and hi == len(text):
            break
        if lo > 0:
            lo = text.rfind("\n", 0, lo - 1) + 1
        if hi < len(text):
            nxt = text.find("\n", hi)
            hi = len(text) if nxt < 0 else nxt + 1
    return {"path": path, "old": old, "new": new}


def apply_edit(text: str, edit: dict[str, str]) -> str:
    if text.count(edit["old"]) != 1:
        raise OpsBenchError(f"{edit['path']}: the edit's text occurs {text.count(edit['old'])} times, not once")
    return text.replace(edit["old"], edit["new"], 1)


# -- Python --------------------------------------------------------------------------------------------------------

COMPARE_SWAP: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
}
BINOP_SWAP: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.FloorDiv: ("//", "*"),
    ast.Mod: ("%", "//"), ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<"), ast.BitAnd: ("&", "|"),
    ast.BitOr: ("|", "&"),
}
BOOL_SWAP: dict[type[ast.boolop], tuple[str, str]] = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


class _Lines:
    """Character offsets of (line, UTF-8 byte column) positions, as `ast` reports them."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        raw = self.lines[line - 1].encode("utf-8")[:col]
        return self.starts[line - 1] + len(raw.decode("utf-8", errors="replace"))


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)
    yield from walk(tree, "")


def _between(lines: _Lines, left: ast.AST, right: ast.AST, token: str) -> int | None:
    """The offset of `token` between the end of `left` and the start of `right` on one line, else None."""
    end_line, end_col = getattr(left, "end_lineno", None), getattr(left, "end_col_offset", None)
    if end_line is None or end_col is None or end_line != right.lineno:  # type: ignore[attr-defined]
        return None
    a = lines.offset(end_line, end_col)
    b = lines.offset(right.lineno, right.col_offset)  # type: ignore[attr-defined]
    gap = lines.text[a:b]
    stripped = gap.strip().strip("()").strip()
    if stripped != token:
        return None
    return a + gap.index(token)


def python_mutations(text: str, path: str) -> list[Mutation]:
    """Every candidate mutation of one Python source file, in a fixed order. Only code inside functions is
    mutated (module-level code runs at import, where a change breaks everything at once)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = _Lines(text)
    found: dict[tuple[str, int, int, str, str], Mutation] = {}

    def add(function: str, start: int, end: int, kind: str, after: str) -> None:
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1)
        m = Mutation(path, line, column, kind, text[start:end], after, function)
        found.setdefault(m.key, m)

    for fname, func in _functions(tree):
        inner = {id(n) for _, f in _functions(func) for n in ast.walk(f)}
        for node in ast.walk(func):
            if id(node) in inner or node is func:
                continue
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                    swap = COMPARE_SWAP.get(type(op))
                    if swap and (pos := _between(lines, left, right, swap[0])) is not None:
                        add(fname, pos, pos + len(swap[0]), "operator", swap[1])
                    for side in (left, right):
                        if (isinstance(side, ast.Constant) and type(side.value) is int
                                and side.lineno == side.end_lineno):
                            s = lines.offset(side.lineno, side.col_offset)
                            e = lines.offset(side.lineno, side.end_col_offset or side.col_offset)
                            if text[s:e].isdigit():
                                add(fname, s, e, "boundary", str(side.value + 1))
                                if side.value > 0:
                                    add(fname, s, e, "boundary", str(side.value - 1))
            elif isinstance(node, ast.BinOp):
                swap = BINOP_SWAP.get(type(node.op))
                if swap and (pos := _between(lines, node.left, node.right, swap[0])) is not None:
                    add(fname, pos, pos + len(swap[0]), "operator", swap[1])
            elif isinstance(node, ast.AugAssign):
                swap = BINOP_SWAP.get(type(node.op))
                if swap and (pos := _between(lines, node.target, node.value, swap[0] + "=")) is not None:
                    add(fname, pos, pos + len(swap[0]) + 1, "operator", swap[1] + "=")
            elif isinstance(node, ast.BoolOp):
                swap = BOOL_SWAP[type(node.op)]
                for left, right in zip(node.values, node.values[1:], strict=False):
                    if (pos := _between(lines, left, right, swap[0])) is not None:
                        add(fname, pos, pos + len(swap[0]), "operator", swap[1])
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and node.lineno == node.end_lineno:
                s = lines.offset(node.lineno, node.col_offset)
                e = lines.offset(node.operand.lineno, node.operand.col_offset)
                if text[s:e].strip() == "not":
                    add(fname, s, e, "operator", "")
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
                for bound in (node.slice.lower, node.slice.upper):
                    if isinstance(bound, ast.Constant) and type(bound.value) is int:
                        s = lines.offset(bound.lineno, bound.col_offset)
                        e = lines.offset(bound.lineno, bound.end_col_offset or bound.col_offset)
                        if text[s:e].isdigit():
                            add(fname, s, e, "boundary", str(bound.value + 1))
            elif isinstance(node, ast.If) and not node.orelse:
                body_end = node.body[-1].end_lineno or node.lineno
                first = lines.starts[node.lineno - 1]
                indent = text[first:lines.offset(node.lineno, node.col_offset)]
                if indent.strip() == "":
                    end = lines.starts[body_end]
                    add(fname, first, end, "branch", f"{indent}pass\n")
            elif (isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords
                  and not any(isinstance(a, ast.Starred) for a in node.args[:2])
                  and node.args[0].lineno == node.args[1].end_lineno):
                a, b = node.args[0], node.args[1]
                sa = lines.offset(a.lineno, a.col_offset)
                ea = lines.offset(a.end_lineno or a.lineno, a.end_col_offset or a.col_offset)
                sb = lines.offset(b.lineno, b.col_offset)
                eb = lines.offset(b.end_lineno or b.lineno, b.end_col_offset or b.col_offset)
                if text[sa:ea] != text[sb:eb] and "\n" not in text[sa:eb]:
                    add(fname, sa, eb, "arguments", text[sb:eb] + text[ea:sb] + text[sa:ea])
    return [found[k] for k in sorted(found)]


def python_compiles(text: str) -> bool:
    try:
        compile(text, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def mutation_edit(text: str, m: Mutation) -> dict[str, str]:
    """The exact edit that makes the mutant of `text` (the file at m.path)."""
    lines = text.split("\n")  # line numbers count "\n" only (splitlines would split at form feeds too)
    start = sum(len(line) + 1 for line in lines[:m.line - 1]) + m.column
    if text[start:start + len(m.before)] != m.before:
        raise OpsBenchError(f"{m.path}:{m.line}: the mutation's text is not where it was listed")
    return unique_edit(text, start, start + len(m.before), m.after, m.path)


# -- Go ------------------------------------------------------------------------------------------------------------

def gomutate_binary(cache_root: Path) -> Path:
    """The helper program, built with the host's Go into the cache (rebuilt when its source is newer)."""
    out = cache_root.resolve() / "bin" / "gomutate"
    source = GOMUTATE_DIR / "main.go"
    if out.is_file() and out.stat().st_mtime >= source.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod",
           "GOCACHE": os.environ.get("GOCACHE") or str(cache_root.resolve() / "host-gocache")}
    proc = subprocess.run(["go", "build", "-o", str(out), "."], cwd=GOMUTATE_DIR, env=env, capture_output=True,
                          text=True, check=False, timeout=300)
    if proc.returncode != 0:
        raise OpsBenchError(f"cannot build the Go mutation helper ({GOMUTATE_DIR}): {proc.stderr.strip()[-800:]}")
    return out


def _gomutate(binary: Path, args: list[str]) -> object:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise OpsBenchError(f"gomutate {args[0]} failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout or "null")


def go_mutations(binary: Path, root: Path, rels: list[str]) -> list[Mutation]:
    """Every candidate mutation of the Go files `rels` (relative to `root`), in a fixed order."""
    if not rels:
        return []
    raw = _gomutate(binary, ["list", *[str(root / r) for r in rels]])
    out: dict[tuple[str, int, int, str, str], Mutation] = {}
    for item in raw if isinstance(raw, list) else []:
        rel = str(Path(item["file"]).relative_to(root))
        text = (root / rel).read_bytes()
        start, end = int(item["start"]), int(item["end"])
        line_start = text.rfind(b"\n", 0, start) + 1
        line = text.count(b"\n", 0, start) + 1
        column = len(text[line_start:start].decode("utf-8", errors="replace"))
        m = Mutation(rel, line, column, item["kind"], text[start:end].decode("utf-8"), item["new"],
                     item.get("func", ""))
        out.setdefault(m.key, m)
    return [out[k] for k in sorted(out)]


def go_hide_tests(binary: Path, root: Path, package_dir: str, names: list[str]) -> list[dict[str, str]]:
    """Edits removing the test functions `names` from the package's _test.go files (with the imports only they
    used); one edit per changed file, as {path, old, new} spans."""
    raw = _gomutate(binary, ["hide", str(root / package_dir), *names])
    edits: list[dict[str, str]] = []
    for item in raw if isinstance(raw, list) else []:
        rel = str(Path(item["file"]).relative_to(root))
        data = (root / rel).read_bytes()
        spans = sorted(((int(s), int(e)) for s, e in item["spans"]), reverse=True)
        for s, e in spans:
            text = data.decode("utf-8")
            cs, ce = len(data[:s].decode("utf-8")), len(data[:e].decode("utf-8"))
            edit = unique_edit(text, cs, ce, "", rel)
            edits.append(edit)
            data = apply_edit(text, edit).encode("utf-8")
    return edits


def python_remove_function(text: str, path: str, qualname: str) -> dict[str, str]:
    """The edit removing the function `qualname` (`func` or `Class.func`, decorators included) from a Python file;
    a body left empty gets `pass`."""
    tree = ast.parse(text)
    *owners, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    for owner in owners:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if cls is None:
            raise OpsBenchError(f"{path}: no class {owner} (looking for {qualname})")
        body = cls.body
    func = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)
    if func is None:
        raise OpsBenchError(f"{path}: no function {qualname}")
    lines = _Lines(text)
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    start = lines.starts[first - 1]
    end = lines.starts[func.end_lineno or func.lineno]
    indent = text[start:lines.offset(first, func.col_offset)] if first == func.lineno else \
        text[start:lines.offset(first, func.decorator_list[0].col_offset - 1)]
    replacement = f"{indent}pass\n" if len(body) == 1 else ""
    return unique_edit(text, start, end, replacement, path)


# -- Java ----------------------------------------------------------------------------------------------------------

def javaparser_jar(cache_root: Path) -> Path:
    """JavaParser's jar in the cache's tool repository (`tools/m2`, apart from the projects' offline repository):
    fetched once from Maven Central by Maven's own client, then checked against the pinned sha256 every time."""
    import hashlib

    group, artifact, version, digest = JAVAPARSER
    repo = cache_root.resolve() / "tools" / "m2"
    jar = repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
    if not jar.is_file():
        repo.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["mvn", "-B", "-q", f"-Dmaven.repo.local={repo}", "dependency:get",
                               "-Dtransitive=false", f"-Dartifact={group}:{artifact}:{version}"],
                              cwd=repo, capture_output=True, text=True, check=False, timeout=300)
        if proc.returncode != 0 or not jar.is_file():
            raise OpsBenchError(f"cannot fetch {group}:{artifact}:{version} from Maven Central for the Java "
                                f"mutation helper: {(proc.stdout + proc.stderr).strip()[-600:]}")
    found = hashlib.sha256(jar.read_bytes()).hexdigest()
    if found != digest:
        raise OpsBenchError(f"{jar}: checksum mismatch for the Java mutation helper's parser: sha256 {found}, "
                            f"pinned {digest}")
    return jar


def javamutate_classpath(cache_root: Path) -> str:
    """The helper compiled with the host's javac into the cache (again when its source is newer), as a classpath."""
    jar = javaparser_jar(cache_root)
    out = cache_root.resolve() / "bin" / "javamutate"
    source = JAVAMUTATE_DIR / "JavaMutate.java"
    stamp = out / "JavaMutate.class"
    if not stamp.is_file() or stamp.stat().st_mtime < source.stat().st_mtime:
        out.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", str(jar), "-d", str(out),
                               str(source)], capture_output=True, text=True, check=False, timeout=300)
        if proc.returncode != 0:
            raise OpsBenchError(f"cannot build the Java mutation helper ({source}): {proc.stderr.strip()[-800:]}")
    return f"{jar}{os.pathsep}{out}"


def _javamutate(classpath: str, args: list[str]) -> object:
    proc = subprocess.run(["java", "-cp", classpath, "JavaMutate", *args],
                          capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise OpsBenchError(f"JavaMutate {args[0]} failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout or "null")


def java_mutations(classpath: str, root: Path, rels: list[str]) -> list[Mutation]:
    """Every candidate mutation of the Java files `rels` (relative to `root`), in a fixed order; each mutant parses
    (the helper re-parses it) and its text is where it says (checked again here)."""
    if not rels:
        return []
    raw = _javamutate(classpath, ["list", *[str(root / r) for r in rels]])
    out: dict[tuple[str, int, int, str, str], Mutation] = {}
    texts: dict[str, str] = {}
    for item in raw if isinstance(raw, list) else []:
        rel = str(Path(item["file"]).relative_to(root))
        text = texts.setdefault(rel, (root / rel).read_text(encoding="utf-8"))
        start, before = int(item["offset"]), str(item["old"])
        if start < 0 or text[start:start + len(before)] != before:
            continue  # a character outside the BMP before it shifts UTF-16 offsets: left out, never misplaced
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1)
        m = Mutation(rel, line, column, str(item["kind"]), before, str(item["new"]), str(item.get("func", "")))
        out.setdefault(m.key, m)
    return [out[k] for k in sorted(out)]


def java_hide_tests(classpath: str, root: Path, rel: str, targets: list[str]) -> list[dict[str, str]]:
    """Edits removing the test methods `targets` (`Class#method`, a nested class as `Outer.Inner#method`) from the
    test file `rel`, each with its Javadoc and annotations, whole lines; one edit per method, bottom up."""
    raw = _javamutate(classpath, ["hide", str(root / rel), *targets])
    spans = [(int(a), int(b)) for item in (raw if isinstance(raw, list) else []) for a, b in item["lines"]]
    text = (root / rel).read_text(encoding="utf-8")
    edits: list[dict[str, str]] = []
    for first, last in sorted(set(spans), reverse=True):
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        if last > len(starts) or first < 1:
            raise OpsBenchError(f"{rel}: lines {first}-{last} are not in the file")
        end = starts[last] if last < len(starts) else len(text)
        edit = unique_edit(text, starts[first - 1], end, "", rel)
        edits.append(edit)
        text = apply_edit(text, edit)
    return edits
