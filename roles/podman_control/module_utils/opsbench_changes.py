"""The environment's change journal: one JSON line per deploy, release or configuration change.

What a team's deploy pipeline and feature-flag console would record, and what the tool gateway's
`get_recent_changes` reads (env/changes.jsonl). Roles that change the environment the way an
operator would (a deploy, a frontend release, a flag switched) append here; an entry says what
changed, never why (a fault role writes the change it makes, not that it is a fault).
"""

import fcntl
import json
import os
import time


def change_id(service, key, when):
    """`change:<service>:<key>:<ms>`: stable prefixes (`change:flags:cartServiceFailure`) for ground truth."""
    parts = ["change", service] + ([key] if key else []) + [str(round(when * 1000))]
    return ":".join(parts)


def append_change(path, service, kind, summary, key=None, details=None, source=None, when=None):
    """Append one entry to the journal at `path` (created 0644 when missing) and return it."""
    when = time.time() if when is None else float(when)
    entry = {"id": change_id(service, key, when), "time": round(when, 3), "service": service, "kind": kind,
             "summary": summary, "source": source or "operator", "details": details or {}}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
    return entry
