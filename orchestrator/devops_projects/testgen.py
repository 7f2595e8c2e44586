"""Test-generation tasks: a mutation no existing test catches, and a hidden test that does (Python projects).

The hidden test is recorded, not written by hand: the project's own suite runs once on the original with a profiler
hook (`CAPTURE_PLUGIN`) that keeps, for every public module-level function of the project, the calls whose arguments
and result are Python literals (`ast.literal_eval(repr(x)) == x`); each is then varied (`EXPAND_SCRIPT`: an integer
+-1, a string cut or repeated ...) and the original's results on those inputs are kept too. For a surviving mutant
in such a function, the recorded calls become assertions (`f(args) == result as the original returned it`); the
first that fails on the mutant is the reference test. The goal describes the bug from what that assertion observed
on the mutant, as an issue would; `verify_tests` then proves the reference fails on the mutant and passes on the
original as evaluate_workspace runs them."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from orchestrator.devops_projects import issue_text, mutate
from orchestrator.devops_projects.fetch import CONTRACT_FILE, run_limited
from orchestrator.devops_projects.tasks import (
    Draw,
    Host,
    Instance,
    Report,
    draw_order,
    instance_id,
    package_name,
    skipped,
    verify_tests,
)
from orchestrator.errors import OpsBenchError

CAPTURE_FILE = "opsbench_capture.json"
MAX_CALLS = 24
"""Recorded calls kept per function, and as many again computed on neighbouring inputs: a surviving mutant differs
from the original on inputs the suite rarely tries, so the more of them, the fewer mutants look equivalent."""
CAPTURE_PLUGIN = r'''
"""OpsBench: record literal calls of the project's public functions while its tests run (generation only)."""
import ast, json, os, sys

_TARGETS = {tuple(t) for t in json.loads(os.environ["OPSBENCH_CAPTURE_TARGETS"])}
_OUT = os.environ["OPSBENCH_CAPTURE_OUT"]
_MAX = int(os.environ.get("OPSBENCH_CAPTURE_MAX", "12"))
_seen = {}
_open = {}


def _literal(value):
    try:
        text = repr(value)
        return text if len(text) < 300 and ast.literal_eval(text) == value else None
    except Exception:
        return None


def _hook(frame, event, arg):
    code = frame.f_code
    key = (code.co_filename, code.co_name, code.co_firstlineno)
    if key not in _TARGETS or code.co_flags & 0x20:  # generators yield, they do not return
        return
    if event == "call":
        n = code.co_argcount
        names = list(code.co_varnames[:n])
        args = [frame.f_locals.get(a) for a in names]
        if code.co_flags & 0x04:
            args += list(frame.f_locals.get(code.co_varnames[n + code.co_kwonlyargcount], ()))
        kwargs = {k: frame.f_locals.get(k) for k in code.co_varnames[n:n + code.co_kwonlyargcount]}
        texts = [_literal(a) for a in args]
        kw = {k: _literal(v) for k, v in kwargs.items()}
        if None not in texts and None not in kw.values() and not code.co_flags & 0x08:
            _open[id(frame)] = (texts, kw)
    elif event == "return" and id(frame) in _open:
        texts, kw = _open.pop(id(frame))
        # A call that raised ends with a "return" event too, its value None: a None result is never recorded.
        result = _literal(arg) if arg is not None else None
        if result is not None:
            calls = _seen.setdefault("|".join(map(str, key)), [])
            call = {"args": texts, "kwargs": kw, "result": result}
            if call not in calls and len(calls) < _MAX:
                calls.append(call)


def pytest_configure(config):
    sys.setprofile(_hook)


def pytest_unconfigure(config):
    sys.setprofile(None)
    with open(_OUT, "w") as f:
        json.dump(_seen, f)
'''


def module_name(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def capture(gen: Host, targets: list[tuple[str, str, int]]) -> dict[str, list[dict[str, Any]]]:
    """Run the suite once on the original with the capture plugin; (file, function, line) -> recorded calls."""
    root = gen.bench.root
    (root / "opsbench_capture_plugin.py").write_text(CAPTURE_PLUGIN)
    out = root / CAPTURE_FILE
    out.unlink(missing_ok=True)
    env = {**gen.bench.env(), "PYTHONPATH": f"{'src' if (root / 'src').is_dir() else '.'}:.",
           "OPSBENCH_CAPTURE_TARGETS": json.dumps([[str(root.resolve() / f), n, line] for f, n, line in targets]),
           "OPSBENCH_CAPTURE_OUT": str(out), "OPSBENCH_CAPTURE_MAX": str(MAX_CALLS)}
    run_limited([".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "opsbench_capture_plugin"],
                cwd=root, timeout=gen.project.limits.test_s * 3, env=env, project=gen.project.id, step="capture")
    (root / "opsbench_capture_plugin.py").unlink(missing_ok=True)
    if not out.is_file():
        return {}
    data: dict[str, list[dict[str, Any]]] = json.loads(out.read_text())
    out.unlink()
    return data


EXPAND_SCRIPT = r'''
"""OpsBench: call the project's functions on neighbours of the recorded inputs, on the original (generation only)."""
import ast, importlib, json, sys

def literal(value):
    try:
        text = repr(value)
        return text if len(text) < 300 and ast.literal_eval(text) == value else None
    except Exception:
        return None

def neighbours(value):
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, 0, value * 2, -value, value + 10, 1]
    if isinstance(value, float):
        return [value + 1, value - 1, 0.0, value * 2, -value, value / 2]
    if isinstance(value, str):
        return [s for s in ("", value[:-1], value + value[-1:], value.upper(), value[::-1], value[1:],
                            value.lower(), value.capitalize(), value + "s", " " + value, value + "_x")
                if s != value]
    if isinstance(value, (list, tuple)):
        return [value[:-1], value[::-1], value + value[:1], value[1:], type(value)()]
    return []

todo = json.load(open(sys.argv[1]))
out = {}
for key, item in todo.items():
    func = getattr(importlib.import_module(item["module"]), item["function"])
    seen, calls = set(), []
    for call in item["calls"]:
        args = [ast.literal_eval(a) for a in call["args"]]
        kwargs = {k: ast.literal_eval(v) for k, v in call["kwargs"].items()}
        for i, arg in enumerate(args):
            for other in neighbours(arg):
                new = args[:i] + [other] + args[i + 1:]
                texts = [literal(a) for a in new]
                if None in texts or repr((texts, kwargs)) in seen:
                    continue
                seen.add(repr((texts, kwargs)))
                try:
                    result = literal(func(*new, **kwargs))
                except Exception:
                    continue
                if result is not None and result != "None":
                    calls.append({"args": texts, "kwargs": {k: literal(v) for k, v in kwargs.items()},
                                  "result": result})
                if len(calls) >= int(sys.argv[3]):
                    break
    out[key] = calls
json.dump(out, open(sys.argv[2], "w"))
'''


def expand(gen: Host, calls: dict[str, list[dict[str, Any]]], names: dict[str, tuple[str, str]]) -> None:
    """Add to each function's recorded calls its results on neighbouring inputs (an integer +-1, a string cut or
    repeated, a list shortened or reversed ...), computed on the original: inputs the suite never tried, so a
    mutant the suite misses may differ on them."""
    root = gen.bench.root
    todo = {key: {"module": names[key][0], "function": names[key][1], "calls": found}
            for key, found in calls.items() if key in names and found}
    if not todo:
        return
    (root / "opsbench_expand_in.json").write_text(json.dumps(todo))
    (root / "opsbench_expand.py").write_text(EXPAND_SCRIPT)
    try:
        run_limited([".venv/bin/python", "opsbench_expand.py", "opsbench_expand_in.json", "opsbench_expand_out.json",
                     str(2 * MAX_CALLS)], cwd=root, timeout=gen.project.limits.test_s,
                    env={**gen.bench.env(), "PYTHONPATH": "src" if (root / "src").is_dir() else "."},
                    project=gen.project.id, step="capture")
        out = root / "opsbench_expand_out.json"
        extra: dict[str, list[dict[str, Any]]] = json.loads(out.read_text()) if out.is_file() else {}
    finally:
        for name in ("opsbench_expand.py", "opsbench_expand_in.json", "opsbench_expand_out.json"):
            (root / name).unlink(missing_ok=True)
    for key, more in extra.items():
        calls[key] = [*calls[key], *[c for c in more if c not in calls[key]]]


def test_path(root: Path, function: str) -> str:
    name = f"test_{function.lower().strip('_')}_behaviour.py"
    for folder in ("tests", "test"):
        if (root / folder).is_dir():
            return f"{folder}/{name}"
    return name


def test_source(module: str, function: str, calls: list[dict[str, Any]]) -> str:
    lines = [f"from {module} import {function}", ""]
    for i, call in enumerate(calls):
        argv = [*call["args"], *(f"{k}={v}" for k, v in call["kwargs"].items())]
        lines += ["", f"def test_{function.strip('_')}_{i}():",
                  f"    assert {function}({', '.join(argv)}) == {call['result']}", ""]
    return "\n".join(lines)


SHARE = 4
"""One mutant in SHARE belongs to test generation's hidden-test draws, the others to the issue family
(`testgen_share`): a fixed split, so neither family's draw depends on whether the other ran first."""


def testgen_share(seed: str, project: str, m: mutate.Mutation) -> bool:
    """Whether the mutant `m` is test generation's to draw from the project's own tests (else the issue family's): a
    pure function of seed, project and mutant. Both families keep mutants that 1 to MAX_HIDDEN tests catch; the
    split keeps one task per mutant without one family's draw reading what the other kept, which made a test-
    generation draw differ when the issue family was not drawn in the same run."""
    digest = hashlib.sha256(f"{seed}/{project}/{m.path}:{m.line}:{m.column}:{m.kind}:{m.after}".encode()).digest()
    return digest[0] % SHARE == 0


def testgen_order(usable: list[mutate.Mutation], seed: str, project: str) -> list[mutate.Mutation]:
    """The draw order of recorded-call candidates: the seed's order, from the mutants alone (never from another
    family's screening, so the same seed draws the same instances whatever else is drawn in the run)."""
    return draw_order(usable, seed, project, "testgen")


def generate(gen: Host, report: Report, count: int, max_draws: int) -> None:
    """Python: recorded-call tests first, then tests of the project's own (`from_hidden_tests`) for the rest of
    `count`; Go and Java: the project's own tests (no profiler records their calls)."""
    if gen.project.language == "python":
        from_recorded_calls(gen, report, count, max_draws)
    if len(report.instances) < count and len(report.draws) < max_draws:
        from_hidden_tests(gen, report, count, max_draws)


MAX_HIDDEN = 3
"""A mutant more test functions catch is a broken library, not one bug (generate.MAX_HIDDEN, the issue family's)."""


def reference_tests(pristine: Path, files: list[str], failures: list[Any]) -> list[dict[str, Any]] | None:
    """The reference of a hidden-test task: each file the hidden tests came from, as released but with those tests
    renamed (`TestX` -> `TestXReproduces`, `test_x` -> `test_x_reproduces`): a file as released is not a test the
    agent wrote, and the evaluation counts only new or changed test files. None when a name is not defined exactly
    once in its file."""
    import re

    names = sorted({f.test.split(".")[-1].split("/")[0] for f in failures})
    out = []
    for rel in files:
        text = (pristine / rel).read_text(encoding="utf-8")
        for name in names:
            pattern = re.compile(rf"^(\s*(?:func|def|(?:(?:public|protected|private|static|final)\s+)*void) )"
                                 rf"{re.escape(name)}\(", re.M)
            found = len(pattern.findall(text))
            if found > 1:
                return None
            new = f"{name}Reproduces" if name.startswith("Test") else f"{name}_reproduces"
            text = pattern.sub(rf"\g<1>{new}(", text)
        out.append({"path": rel, "content": text})
    return out if any(e["content"] != (pristine / e["path"]).read_text(encoding="utf-8") for e in out) else None


def from_hidden_tests(gen: Host, report: Report, count: int, max_draws: int) -> None:
    """Test generation whose reference test is the project's own: a mutant that 1 to MAX_HIDDEN test functions catch
    (and the rest of the suite does not) is put into the workspace with those tests removed, so no test the agent
    has catches it; the reference gives the removed tests back (their files as released). The workspace's suite
    must pass on the mutant, and `verify_tests` proves the reference (those tests back, renamed: `reference_tests`)
    fails on the mutant and passes on the original with more tests than the workspace has (`workspace_tests`,
    counted as the evaluation counts). The bug report is
    written from what the removed tests observed, as an issue's is; a mutant kept by another family is skipped."""
    import tempfile

    from orchestrator.devops_projects.tasks import materialise

    bench = gen.bench
    candidates = [m for m in bench.mutations() if m.key not in gen.kept
                  and testgen_share(gen.seed, gen.project.id, m)]
    report.candidates = max(report.candidates, len(candidates))
    lang = gen.project.language
    for m in draw_order(candidates, gen.seed, gen.project.id, "testgen-hidden"):
        if len(report.instances) >= count or len(report.draws) >= max_draws:
            break
        if m.key in gen.kept:
            continue
        draw = Draw("testgen", gen.project.id, f"{m.describe()} (hidden test)")
        report.draws.append(draw)
        if skipped(gen, draw):
            continue
        t0 = time.monotonic()
        text = (bench.root / m.path).read_text(encoding="utf-8")
        edit = mutate.mutation_edit(text, m)
        if lang == "python" and not mutate.python_compiles(mutate.apply_edit(text, edit)):
            draw.reason = "does not compile"
            continue
        suite = gen.screen(m, edit)
        draw.screen_s = round(time.monotonic() - t0, 2)
        if suite.broken:
            draw.reason = ("does not compile: " if "build" in suite.broken else "breaks the test run: ") \
                + suite.broken[:200]
            continue
        if not suite.failed:
            draw.reason = "no existing test fails (a surviving mutant: no test of the project's to hide)"
            continue
        if len(suite.failed) > MAX_HIDDEN:
            draw.reason = f"too many tests fail: {len(suite.failed)} test functions, at most {MAX_HIDDEN} are hidden"
            continue
        failures = list(suite.failed.values())
        title, body = issue_text.write_issue(gen.project.id, lang, package_name(gen.project), failures)
        forbidden = sorted({f.test for f in failures} | {Path(f.file).name for f in failures
                                                         if f.file.endswith((".py", ".go", ".java"))})
        if len(m.after.strip()) >= 6:
            forbidden.append(m.after.strip())
        leaked = issue_text.leaks(title + "\n" + body, forbidden)
        if leaked:
            draw.reason = f"the bug report would name what it must not: {', '.join(leaked[:3])}"
            continue
        try:
            hide = bench.hide_edits(suite.failed)
        except (OpsBenchError, OSError, ValueError, SyntaxError) as exc:
            draw.reason = f"cannot hide the failing tests: {exc}"
            continue
        bug = [edit, *hide]
        reference = reference_tests(gen.pristine, sorted({h["path"] for h in hide}), failures)
        if reference is None:
            draw.reason = "cannot name the hidden tests anew (a name is defined more than once in its file)"
            continue
        t1 = time.monotonic()
        with tempfile.TemporaryDirectory(dir=gen.verify_dir("testgen-workspace")) as tmp:
            workspace = Path(tmp) / gen.project.id
            try:
                materialise(gen.pristine, bug, workspace)
            except (OpsBenchError, OSError, ValueError) as exc:
                draw.reason = f"an edit does not apply: {exc}"
                continue
            rc, visible, failed, found = gen.check(workspace)
        if rc != 0 or failed or not found or not visible:
            draw.reason = (f"verify: the workspace's own tests do not pass with the failing ones hidden (exit {rc}, "
                           f"{failed} failed)")
            continue
        why, proof = verify_tests(gen.pristine, visible, bug, reference, gen.check, gen.verify_dir("testgen"))
        proof["workspace"] = {"rc": rc, "passed": visible, "failed": failed}
        draw.verify_s = round(time.monotonic() - t1, 2)
        if why:
            draw.reason = f"verify: {why}"
            continue
        iid = instance_id("testgen", gen.project.id, draw.what)
        where = {"go": "a `_test.go` file in the package, run by `go test`",
                 "java": "a JUnit test class under `src/test/java`, run by Maven Surefire",
                 "python": "a new `test_*.py` file for pytest"}.get(lang, "beside the project's tests")
        goal = (f"A bug is reported in the project at /workspace/{gen.project.id} ({lang}, {package_name(gen.project)} "
                f"{gen.project.source.version}):\n\n> {title}\n>\n"
                + "\n".join(f"> {line}".rstrip() for line in body.splitlines())
                + "\n\nNo test of the project catches this bug yet. Write a test that reproduces it: it must fail on "
                  f"the code as it is now and pass once the bug is fixed. Put it beside the project's tests ({where}); "
                  f"`make -s -f {CONTRACT_FILE} check` builds the project and runs all its tests. Keep the existing "
                  "tests. Only your test files are evaluated: they are run against the code as it is and against a "
                  "fixed version (where all other tests must still pass), so you need not fix the bug. Name the "
                  "test files in your output.")
        report.instances.append(Instance(
            iid, "testgen", gen.project.id, lang, title, goal, bug,
            {"task": "write-test", "kind": "write-tests", "project": gen.project.id, "bug": bug}, reference,
            provenance={"mutation": m.as_dict(), "method": "hidden-test", "hidden_tests": sorted(suite.failed),
                        "seed": gen.seed, "pristine_tests": gen.tests, "workspace_tests": visible}, proof=proof))
        draw.kept, draw.instance = True, iid
        gen.kept.add(m.key)
        gen.say(f"{gen.project.id}: kept {iid} ({m.describe()}, the project's own test hidden)")


def from_recorded_calls(gen: Host, report: Report, count: int, max_draws: int) -> None:
    """Python: a mutant no test catches, with a differential test recorded from the original's calls."""
    bench = gen.bench
    # Module-level functions, private helpers too (a test may import them): methods need an instance the recorder
    # cannot replay.
    candidates = [m for m in bench.mutations() if "." not in m.function and not m.function.startswith("__")]
    report.candidates = len(candidates)
    targets: dict[tuple[str, str], int] = {}
    import ast
    for rel in sorted({m.path for m in candidates}):
        tree = ast.parse((bench.root / rel).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                # co_firstlineno of a decorated function is its first decorator's line
                targets[(rel, node.name)] = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    calls = capture(gen, [(f, n, line) for (f, n), line in sorted(targets.items())])
    names = {f"{(bench.root.resolve() / f)}|{n}|{line}": (module_name(f), n) for (f, n), line in targets.items()}
    expand(gen, calls, names)
    def recorded(m: mutate.Mutation) -> list[dict[str, Any]]:
        line = targets.get((m.path, m.function))
        return calls.get(f"{(bench.root.resolve() / m.path)}|{m.function}|{line}", []) if line else []
    usable = [m for m in candidates if recorded(m)]
    for m in testgen_order(usable, gen.seed, gen.project.id):
        if len(report.instances) >= count or len(report.draws) >= max_draws:
            break
        draw = Draw("testgen", gen.project.id, m.describe())
        report.draws.append(draw)
        if skipped(gen, draw):
            continue
        t0 = time.monotonic()
        text = (bench.root / m.path).read_text(encoding="utf-8")
        edit = mutate.mutation_edit(text, m)
        if not mutate.python_compiles(mutate.apply_edit(text, edit)):
            draw.reason = "does not compile"
            continue
        # The recorded calls first (one small test file, about a second): most mutants they cannot tell apart are
        # never run against the whole suite.
        module = module_name(m.path)
        rel = test_path(bench.root, m.function)
        (bench.root / rel).write_text(test_source(module, m.function, recorded(m)))
        try:
            with bench.applied([edit]):
                killed = bench.run(only=rel)
        finally:
            (bench.root / rel).unlink()
        hits = sorted(k for k in killed.failed if k.startswith(rel + "::"))
        if killed.broken or not hits:
            draw.screen_s = round(time.monotonic() - t0, 2)
            draw.reason = "an equivalent mutant on every recorded call (no recorded call tells them apart)" \
                if not killed.broken else f"the recorded test does not run: {killed.broken[:200]}"
            continue
        suite = gen.screen(m, edit)
        draw.screen_s = round(time.monotonic() - t0, 2)
        if suite.broken or suite.failed:
            draw.reason = "an existing test catches it (an issue, not a test-generation task)" if suite.failed \
                else f"breaks the test run: {suite.broken[:200]}"
            continue
        index = int(hits[0].rsplit("_", 1)[1])
        call = recorded(m)[index]
        test_edit = {"path": rel, "content": test_source(module, m.function, [call])}
        (bench.root / rel).write_text(test_edit["content"])
        try:
            original = bench.run(only=rel)  # the one call again, on the original: it must hold there
        finally:
            (bench.root / rel).unlink()
        if original.broken or original.failed:
            draw.reason = "the recorded call does not hold on the original when replayed"
            continue
        failure = killed.failed[hits[0]]
        title, body = issue_text.write_issue(gen.project.id, "python", package_name(gen.project), [failure])
        changed = m.after.strip()
        leaked = issue_text.leaks(title + "\n" + body, [changed] if len(changed) >= 6 else [])
        if leaked:
            draw.reason = f"the bug report would name what it must not: {', '.join(leaked[:3])}"
            continue
        t1 = time.monotonic()
        why, proof = verify_tests(gen.pristine, gen.tests, [edit], test_edit, gen.check, gen.verify_dir("testgen"))
        draw.verify_s = round(time.monotonic() - t1, 2)
        if why:
            draw.reason = f"verify: {why}"
            continue
        iid = instance_id("testgen", gen.project.id, draw.what)
        goal = (f"A bug is reported in the project at /workspace/{gen.project.id} (python, {package_name(gen.project)} "
                f"{gen.project.source.version}):\n\n> {title}\n>\n"
                + "\n".join(f"> {line}".rstrip() for line in body.splitlines())
                + "\n\nWrite a test that reproduces this bug: it must fail on the code as it is now and pass once the "
                  "bug is fixed. Put it beside the project's tests (a new `test_*.py` file for pytest is best); "
                  f"`make -s -f {CONTRACT_FILE} check` builds the project and runs all its tests. Keep the existing "
                  "tests. Only your test files are evaluated: they are run against the code as it is and against a "
                  "fixed version (where all other tests must still pass), so you need not fix the bug. Name the "
                  "test files in your output.")
        report.instances.append(Instance(
            iid, "testgen", gen.project.id, "python", title, goal, [edit],
            {"task": "write-test", "kind": "write-tests", "project": gen.project.id, "bug": [edit]},
            [test_edit],
            provenance={"mutation": m.as_dict(), "method": "recorded-call", "recorded_call": call, "seed": gen.seed,
                        "pristine_tests": gen.tests}, proof=proof))
        draw.kept, draw.instance = True, iid
        gen.kept.add(m.key)
        gen.say(f"{gen.project.id}: kept {iid} ({m.describe()})")
