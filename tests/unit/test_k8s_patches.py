"""The fault library's JSON patches and their saved inverses (roles/k8s_control/filter_plugins)."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import pytest

from orchestrator import paths

_spec = importlib.util.spec_from_file_location(
    "opsbench_k8s", paths.ROLES_DIR / "k8s_control" / "filter_plugins" / "opsbench_k8s.py")
assert _spec and _spec.loader
k8s = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(k8s)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cart"},
    "spec": {"replicas": 1, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
        {"name": "cart", "image": "shop:current", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "resources": {"limits": {"memory": "256Mi"}}}]}}},
}

CASES = [
    [{"op": "replace", "path": "/spec/replicas", "value": 0}],
    [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "shop:nope"}],
    [{"op": "replace", "path": "/spec/template/spec/containers/0/env/1", "value": {"name": "B", "value": "x"}}],
    [{"op": "add", "path": "/spec/template/spec/containers/0/resources/limits/memory", "value": "24Mi"},
     {"op": "add", "path": "/spec/template/spec/containers/0/resources/requests", "value": {}},
     {"op": "add", "path": "/spec/template/spec/containers/0/resources/requests/memory", "value": "24Mi"}],
    [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {}},
     {"op": "add", "path": "/spec/template/spec/nodeSelector/opsbench.io~1pool", "value": "x"}],
    [{"op": "add", "path": "/spec/template/spec/containers/0/env/0", "value": {"name": "Z", "value": "0"}}],
    [{"op": "remove", "path": "/spec/template/metadata/labels/a"}],
    [{"op": "add", "path": "/spec/template/metadata/annotations", "value": {"k": "v"}}],
]


@pytest.mark.parametrize("ops", CASES)
def test_restore_undoes_exactly(ops):
    original = copy.deepcopy(DEPLOYMENT)
    restore = k8s.k8s_restore_ops(original, ops)
    injected = k8s.k8s_apply_ops(original, ops)
    assert injected != original
    assert k8s.k8s_apply_ops(injected, restore) == original
    assert original == DEPLOYMENT  # the filters never change their input


def test_append_is_refused():
    with pytest.raises(ValueError, match="named path"):
        k8s.k8s_restore_ops(DEPLOYMENT, [{"op": "add", "path": "/spec/template/spec/containers/-", "value": {}}])


def test_lookups():
    assert k8s.k8s_container_index(DEPLOYMENT, "") == 0
    assert k8s.k8s_container_index(DEPLOYMENT, "cart") == 0
    with pytest.raises(ValueError, match="no container 'x'"):
        k8s.k8s_container_index(DEPLOYMENT, "x")
    assert k8s.k8s_env_index(DEPLOYMENT, 0, "B") == 1
    with pytest.raises(ValueError, match="no environment variable"):
        k8s.k8s_env_index(DEPLOYMENT, 0, "C")
    assert k8s.k8s_pointer("opsbench.io/restarted-by") == "/opsbench.io~1restarted-by"
    assert k8s.k8s_find([None, DEPLOYMENT], "Deployment", "cart") is DEPLOYMENT
