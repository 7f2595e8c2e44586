"""The issue a user would file for a bug the hidden tests catch: written from what the failing tests observed (the
failing statement, the values pytest's assertion rewriting shows, the message a Go test prints, a JUnit test's
failing statement with its assertion message or exception and the library's frames), never naming a test, a test
file or the mutated code. `leaks` checks the finished text against everything it must not contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_FAILURES = 3
MAX_LINES = 14


@dataclass(frozen=True)
class Failure:
    """One failing test case as the test runner reported it: `test` its name (never shown), `file` its file (never
    shown), `detail` the runner's failure text (a pytest traceback, a Go test's output lines)."""

    test: str
    file: str
    detail: str


ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
FUNCTION_REPR = re.compile(r"<(?:bound method|function|built-in function) ([\w.]+)[^>]*>")
TEST_NAMES = re.compile(r"\b(?:Test\w+|test_\w+|\w+_test\.go|\w*Test\.java)\b")
GO_PREFIX = re.compile(r"^\s*[\w.-]+\.go:\d+: ?")


def _python_lines(detail: str) -> tuple[list[str], list[str]]:
    """(the failing statement's lines, pytest's explanation lines) of one pytest failure text."""
    statement: list[str] = []
    explanation: list[str] = []
    for raw in detail.splitlines():
        if raw.startswith(">"):
            statement.append(raw[1:].strip())
        elif raw.startswith("E "):
            line = raw[1:].strip()
            if line:
                explanation.append(line)
    # Only the test's own statement (the first frame): later frames are the library's code, the mutated line among
    # them; what went wrong there is in the E lines.
    return statement[:1], explanation


def _clean(line: str) -> str:
    line = ADDRESS.sub("", line)
    line = FUNCTION_REPR.sub(lambda m: m.group(1).rsplit(".", 1)[-1], line)
    return line.rstrip()


GO_FRAME_ARGS = re.compile(r"\((?:0x[0-9a-f]+\??|\{[^}]*\}|\.\.\.|, )*\)$")


def _go_lines(detail: str) -> list[str]:
    """What a failing Go test printed: its messages (file:line prefixes cut), and for a panic the panic line and
    the library's frames (function names only: no addresses, no test or runtime frames)."""
    out = []
    for raw in detail.splitlines():
        s = raw.strip()
        if not s or s.startswith(("=== ", "--- ", "FAIL", "PASS", "ok ", "goroutine ", "exit status", "created by")):
            continue
        if raw.startswith("\t/") or s.startswith("/") or re.search(r"\.go:\d+ \+0x", s):
            continue  # a stack frame's file and line
        if GO_FRAME_ARGS.search(s) and not s.startswith("panic:"):
            name = GO_FRAME_ARGS.sub("", s)
            if name.startswith(("testing.", "runtime.", "panic")) or TEST_NAMES.search(name):
                continue
            out.append(f"at {name.rsplit('/', 1)[-1]}(...)")
            continue
        out.append(GO_PREFIX.sub("", raw).strip())
    return out


JAVA_FRAME = re.compile(r"^\s*at ([\w$.<>]+)\.([\w$<>]+)\(([^)]*)\)")
JAVA_MACHINERY = ("java.", "javax.", "jdk.", "sun.", "org.junit.", "junit.", "org.opentest4j.", "org.apache.maven.",
                  "org.hamcrest.", "org.assertj.", "org.mockito.")
JAVA_TEST_CLASS = re.compile(r"Test(?:s|Case)?(?:\$|$)")
"""A test class's name (`FooTest`, `FooTests`, a base class `AbstractParserTestCase`, nested ones too): its frames
are the test's own, never quoted."""
JAVA_ASSERTIONS = ("AssertionFailedError", "AssertionError", "ComparisonFailure", "MultipleFailuresError",
                   "AssertionFailure")


def _java_lines(detail: str) -> list[str]:
    """What a failing JUnit test showed: the test's failing statement (`> ` lines the bench read from the test
    file), the assertion's message (or the exception's simple name and message) and, for an exception the library
    threw, its frames in the library (class and method only) before the test's own frame."""
    statement = [raw[2:].strip() for raw in detail.splitlines() if raw.startswith("> ")]
    trace = [raw for raw in detail.splitlines() if not raw.startswith("> ")]
    message: list[str] = []
    frames: list[str] = []
    seen_frame = False
    for raw in trace:
        s = raw.strip()
        if not s:
            continue
        frame = JAVA_FRAME.match(raw)
        if frame:
            seen_frame = True
            owner, method = frame.group(1), frame.group(2)
            if owner.startswith(JAVA_MACHINERY) or JAVA_TEST_CLASS.search(owner) \
                    or TEST_NAMES.search(owner.rsplit(".", 1)[-1]):
                if not owner.startswith(JAVA_MACHINERY):
                    break  # the test's own frame: what follows is the test framework
                continue
            frames.append(f"at {owner.rsplit('.', 1)[-1].replace('$', '.')}.{method}(...)")
            continue
        if seen_frame:
            if s.startswith(("Caused by:", "Suppressed:")):
                break
            continue
        if not message:
            head, _, rest = s.partition(": ")
            name = head.rsplit(".", 1)[-1]
            if re.fullmatch(r"[\w.$]+", head) and rest:
                s = rest if name in JAVA_ASSERTIONS else f"{name}: {rest}"
            elif re.fullmatch(r"[\w.$]+", head):
                s = f"{name} (no message)" if name not in JAVA_ASSERTIONS else ""
        if s:
            message.append(s)
    return statement + message[:4] + frames[:4]


def called_names(lines: list[str]) -> list[str]:
    """Names called in the observed lines, most specific first (a title for the issue)."""
    names = re.findall(r"(?<!new )\b([A-Za-z_][\w.]*)\(", "\n".join(lines))  # a Java constructor names no call
    skip = {"assert", "len", "list", "tuple", "set", "dict", "str", "int", "float", "repr", "isinstance", "type",
            "sorted", "print", "panic", "Errorf", "Fatalf", "Error", "Fatal", "Sprintf", "raises", "approx"}
    seen: list[str] = []
    for n in names:
        short = n.rsplit(".", 1)[-1]
        if (short not in skip and short not in seen and not TEST_NAMES.fullmatch(short)
                and not short.startswith(("assert", "fail"))):  # unittest's own checks name nothing of the library
            seen.append(short)
    return seen


def write_issue(project: str, language: str, package: str, failures: list[Failure]) -> tuple[str, str]:
    """(title, body) of the issue for `failures` (at most MAX_FAILURES are quoted)."""
    blocks: list[list[str]] = []
    observed: list[str] = []
    for failure in failures[:MAX_FAILURES]:
        if language == "python":
            statement, explanation = _python_lines(failure.detail)
            lines = [_clean(s) for s in statement] + [_clean(e) for e in explanation]
        elif language == "java":
            lines = [_clean(s) for s in _java_lines(failure.detail)]
        else:
            lines = [_clean(s) for s in _go_lines(failure.detail)]
        lines = [TEST_NAMES.sub("...", line) for line in lines if line][:MAX_LINES]
        if lines and lines not in blocks:
            blocks.append(lines)
            observed.extend(lines)
    names = called_names(observed)
    subject = f"`{names[0]}` in {package}" if names else f"{package}"
    title = f"{subject} gives a wrong result" if names else f"{package} gives wrong results"
    runner = {"python": "pytest", "go": "go test", "java": "JUnit"}.get(language, "tests")
    body = [f"Since the last change, {subject} no longer behaves as documented. Checks we run against the "
            f"library ({runner}) now fail:", ""]
    if not blocks:
        body.append("    (the check fails without a message)")
    for i, lines in enumerate(blocks):
        if i:
            body.append("")
            body.append("Another one:")
            body.append("")
        body.extend(f"    {line}" for line in lines)
    body += ["", "These passed before. Please fix the library so that it behaves as expected again."]
    return title, "\n".join(body)


def leaks(text: str, forbidden: list[str]) -> list[str]:
    """The forbidden strings (test names, test files, mutated code) that occur in `text`, and any test-like name."""
    found = [f for f in forbidden if f and f in text]
    found += [m for m in TEST_NAMES.findall(text) if m not in found]
    return found
