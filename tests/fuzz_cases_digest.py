"""Digest of the cases Hypothesis executed, per property test: shows that two runs drew the same cases.

Run the property tests with Hypothesis' observability on, once per run, into separate directories:

    HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY=1 HYPOTHESIS_STORAGE_DIRECTORY=/tmp/run-a pytest tests/unit/test_fuzz_*.py
    python tests/fuzz_cases_digest.py /tmp/run-a > a.txt    # and the same for run b; then diff a.txt b.txt

Each line: the property, its number of cases and a hash of the generated arguments in execution order. Left out,
as not part of a case: temp paths, object addresses, and of a schemathesis case everything but what it sends
(its random report label, timestamps and Python hash() values vary from run to run).
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

SENT = ("method", "path_parameters", "headers", "cookies", "query", "body", "media_type")


def scrub(value: Any) -> Any:
    if isinstance(value, dict) and "_components" in value:  # a schemathesis Case
        return {"operation": value["operation"]["path"], **{k: value.get(k) for k in SENT}}
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def digests(storage: Path) -> dict[str, tuple[int, str]]:
    cases: dict[str, list[str]] = collections.defaultdict(list)
    for file in sorted(storage.rglob("*testcases.jsonl")):
        for line in file.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") != "test_case":
                continue
            text = json.dumps(scrub(record.get("arguments")), sort_keys=True, default=repr)
            text = re.sub(r" at 0x[0-9a-f]+", "", re.sub(r"/tmp/[^\s'\")]*", "<tmp>", text))
            cases[record["property"]].append(f"{text}|{record.get('status', '')}")
    return {prop: (len(reps), hashlib.sha256("\n".join(reps).encode()).hexdigest()[:16])
            for prop, reps in sorted(cases.items())}


if __name__ == "__main__":
    for prop, (count, digest) in digests(Path(sys.argv[1])).items():
        print(f"{prop}: {count} cases, sha256 {digest}")
