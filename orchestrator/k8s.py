"""The kubernetes backend's preflight: which cluster a run would use, and whether it answers.

The orchestrator changes nothing on the cluster (roles do); it only checks, before the first step,
that the kubeconfig exists and its API server answers, so `opsbench run` of a kubernetes scenario
fails in seconds with a message that says what to do instead of deep inside a deploy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator import paths
from orchestrator.errors import OpsBenchError

SETUP_HINT = ("start the local one with `make cluster`, or create one (for example `kind create cluster --name "
              "opsbench`, then `make k8s-images`) and point KUBECONFIG at its kubeconfig; see docs/backends.md, "
              "'The kubernetes backend'")


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    context: str
    server: str
    version: str


def local_cluster_kubeconfig() -> Path:
    """The kubeconfig `make cluster` writes (roles/k8s_cluster); it exists only while that cluster is up."""
    return paths.state_dir() / "cluster" / "kubeconfig"


def kubeconfig_path() -> Path:
    """KUBECONFIG (its first file when it lists several), else the local cluster's while `make cluster` runs,
    else ~/.kube/config."""
    env = os.environ.get("KUBECONFIG", "")
    first = env.split(os.pathsep)[0] if env else ""
    if first:
        return Path(first).expanduser()
    local = local_cluster_kubeconfig()
    return local if local.is_file() else Path.home() / ".kube" / "config"


def require_cluster(scenario_id: str = "", timeout: float = 5.0) -> Cluster:
    """The reachable cluster of the current kubeconfig, or an OpsBenchError naming it and what to do."""
    from kubernetes import client, config  # the declared `kubernetes` dependency
    from kubernetes.config.config_exception import ConfigException

    what = f"scenario {scenario_id} uses" if scenario_id else "this needs"
    path = kubeconfig_path()
    source = ("KUBECONFIG" if os.environ.get("KUBECONFIG") else "the cluster of `make cluster` (KUBECONFIG is unset)"
              if path == local_cluster_kubeconfig() else "the default ~/.kube/config (KUBECONFIG is unset)")
    if not path.is_file():
        raise OpsBenchError(f"{what} the kubernetes backend, but there is no kubeconfig at {path} ({source}): "
                            f"no Kubernetes cluster to run on. To run it, {SETUP_HINT}.")
    context = os.environ.get("OPSBENCH_K8S_CONTEXT") or None
    try:
        api_client = config.new_client_from_config(config_file=str(path), context=context)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise OpsBenchError(f"{what} the kubernetes backend, but the kubeconfig {path} ({source}) cannot be "
                            f"loaded: {exc}. Fix it, or {SETUP_HINT}.") from exc
    server = api_client.configuration.host
    try:
        _, active = config.list_kube_config_contexts(config_file=str(path))  # type: ignore[no-untyped-call]
        ctx_name = context or (active or {}).get("name", "?")
    except (ConfigException, OSError, ValueError, TypeError):
        ctx_name = context or "?"
    try:
        info = client.VersionApi(api_client).get_code(_request_timeout=timeout)
    except Exception as exc:  # urllib3 and ApiException alike: all mean "not usable"
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        raise OpsBenchError(f"{what} the kubernetes backend, but the cluster of kubeconfig {path} "
                            f"(context {ctx_name}, API server {server}) does not answer: {reason}. "
                            f"Start it, or {SETUP_HINT}.") from exc
    finally:
        api_client.close()
    return Cluster(kubeconfig=path, context=str(ctx_name), server=str(server), version=str(info.git_version))
