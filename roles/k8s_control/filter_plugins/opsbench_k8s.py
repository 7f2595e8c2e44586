"""Filters for the Kubernetes fault roles: JSON patches and their exact inverse.

A fault changes an object with RFC 6902 operations (``add``, ``replace``, ``remove``); before it does,
``k8s_restore_ops`` records, for every path it touches, the value there (or that there was none), so
removal puts back exactly what was there and nothing else.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

_MISSING = object()


def _get(obj: Any, path: str) -> Any:
    try:
        return jsonpointer.resolve_pointer(obj, path)
    except jsonpointer.JsonPointerException:
        return _MISSING


def k8s_restore_ops(obj: dict[str, Any], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operations that undo ``ops`` on ``obj`` (to be applied after them, in the given order)."""
    restore: list[dict[str, Any]] = []
    current = copy.deepcopy(obj)
    for op in ops:
        if op.get("op") not in ("add", "replace", "remove") or op["path"].endswith("/-"):
            raise ValueError(f"unsupported fault patch operation {op!r}: use add/replace/remove on a named path")
        before = _get(current, op["path"])
        parent = _get(current, op["path"].rsplit("/", 1)[0])
        if before is _MISSING or (op["op"] == "add" and isinstance(parent, list)):
            # The path did not exist, or an array insertion: take the new element away again.
            restore.insert(0, {"op": "remove", "path": op["path"]})
        elif op["op"] == "remove":
            restore.insert(0, {"op": "add", "path": op["path"], "value": copy.deepcopy(before)})
        else:
            restore.insert(0, {"op": "replace", "path": op["path"], "value": copy.deepcopy(before)})
        current = jsonpatch.apply_patch(current, [op])
    return restore


def k8s_apply_ops(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """``obj`` with ``ops`` applied (a copy)."""
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return result


def k8s_find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The manifest of ``kind``/``name`` among ``docs``."""
    for doc in docs:
        if doc and doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
            return doc
    raise ValueError(f"no {kind} named {name!r} among the rendered manifests")


def k8s_container_index(obj: dict[str, Any], container: str = "") -> int:
    """Index of ``container`` (default: the first) in a workload's pod template."""
    containers = obj["spec"]["template"]["spec"]["containers"]
    if not container:
        return 0
    for i, c in enumerate(containers):
        if c["name"] == container:
            return i
    raise ValueError(f"{obj['kind']} {obj['metadata']['name']} has no container {container!r} "
                     f"(it has {', '.join(c['name'] for c in containers)})")


def k8s_env_index(obj: dict[str, Any], container: int, variable: str) -> int:
    """Index of environment variable ``variable`` in container number ``container``."""
    env = obj["spec"]["template"]["spec"]["containers"][container].get("env", [])
    for i, e in enumerate(env):
        if e["name"] == variable:
            return i
    raise ValueError(f"{obj['kind']} {obj['metadata']['name']} sets no environment variable {variable!r}")


def k8s_pointer(*parts: Any) -> str:
    """A JSON pointer from path segments (escapes ``~`` and ``/``, e.g. in annotation keys)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "k8s_restore_ops": k8s_restore_ops,
            "k8s_apply_ops": k8s_apply_ops,
            "k8s_find": k8s_find,
            "k8s_container_index": k8s_container_index,
            "k8s_env_index": k8s_env_index,
            "k8s_pointer": k8s_pointer,
        }
