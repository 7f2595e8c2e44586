"""Control actions on the application, behind one interface per backend.

`ControlBackend` is what the control tools (`tools/control.py`) call. `FakeControl` keeps state in memory (tests,
dry runs); `PodmanControl` acts on the `local` backend's containers. Both refuse anything that is not the
application: the tool layer already checked names against the visible topology (`scope.py`); the backend checks
again against what it actually finds (container labels), so a stale topology cannot open a way to the machinery.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .errors import ToolError, denied
from .scope import is_internal

SECRET_KEY = re.compile(r"(?i)pass|secret|token|key|credential|auth")
"""Environment variable names whose values describe_service shows as [redacted]."""

FAULT_LABEL = "opsbench.fault"
RUN_LABEL = "opsbench.run"
SCALED_LABEL = "opsbench.scaled"
SCALED_TARGETS = "scaled_targets.json"  # in env/config, read by Prometheus's file_sd (roles/env_shop)
SCRAPE_PORT = 8080


class ControlBackend(Protocol):
    """Scoped control of the application. Every method raises ToolError on refusal or failure."""

    def list_services(self) -> list[dict[str, Any]]:
        """Each service of the application with its instances and their state."""
        ...

    def describe_service(self, service: str) -> dict[str, Any]:
        """One service's instances in detail: state, restarts, image, limits, environment (secrets redacted)."""
        ...

    def restart(self, service: str, instance: str | None = None) -> dict[str, Any]:
        """Restart every instance of `service`, or only `instance`."""
        ...

    def scale(self, service: str, replicas: int) -> dict[str, Any]: ...

    def set_env(self, service: str, env: Mapping[str, str]) -> dict[str, Any]: ...

    def rollback(self, service: str) -> dict[str, Any]: ...

    def list_flags(self) -> list[str]:
        """Names of the feature flags the application reads (not their state)."""
        ...

    def toggle_flag(self, flag: str, on: bool) -> dict[str, Any]:
        """Switch a feature flag's default variant to `on` or `off`; returns the previous and current variant."""
        ...


# -- feature flags (flagd file format, see roles/env_shop/files/app/shop/flags.py) -----------------------------------

@functools.cache
def podman_helpers() -> Any:
    """roles/podman_control's module_utils (run_args, apply_overrides): the one definition of how a run's
    container is created from its spec, shared with the fault roles. Loaded once per process (every podman call
    asks for it)."""
    import importlib.util

    from orchestrator import paths

    file = paths.ROLES_DIR / "podman_control" / "module_utils" / "opsbench_podman.py"
    spec = importlib.util.spec_from_file_location("opsbench_podman", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_flags(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ToolError("backend_error", f"cannot read the feature flags file: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("flags", {}), dict):
        raise ToolError("backend_error", "the feature flags file is not in flagd format")
    return doc


def set_flag_variant(path: Path, flag: str, variant: str) -> tuple[str | None, str]:
    """Set `flag`'s defaultVariant to `variant` and replace the file atomically (write, then rename in the same
    directory), so services reading it at any moment see the old or the new flags, never half a file."""
    doc = read_flags(path)
    flags: dict[str, Any] = doc.setdefault("flags", {})
    entry = flags.get(flag)
    if not isinstance(entry, dict):
        known = ", ".join(sorted(f for f in flags if not is_internal(f)))
        raise ToolError("not_found", f"flag: no feature flag {flag!r}; flags: {known}", field="flag")
    if variant not in (entry.get("variants") or {}):
        raise ToolError("backend_error", f"flag {flag!r} has no {variant!r} variant")
    previous = entry.get("defaultVariant")
    if previous != variant or entry.get("state") != "ENABLED":
        flags[flag] = {**entry, "defaultVariant": variant, "state": "ENABLED"}
        fd, tmp = tempfile.mkstemp(prefix=".flags-", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh, indent=2, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise ToolError("backend_error", f"cannot write the feature flags file: {exc}") from None
    return (str(previous) if previous is not None else None), variant


def _check_flag(flag: str) -> None:
    if is_internal(flag):
        raise denied(f"flag: {flag!r} steers the benchmark's load generator, not the application", field="flag")


# -- in memory ------------------------------------------------------------------------------------------------------

class FakeControl:
    """In-memory backend: services with instances, flags with variants, and a log of the actions taken."""

    def __init__(self, services: Mapping[str, Sequence[str]], flags: Mapping[str, str] | None = None) -> None:
        self.services = {s: list(ids) for s, ids in services.items()}
        self.flags = dict(flags or {})
        self.actions: list[tuple[str, ...]] = []

    def _instances(self, service: str) -> list[str]:
        if service not in self.services:
            raise ToolError("not_found", f"service: no service {service!r}", field="service")
        return self.services[service]

    def list_services(self) -> list[dict[str, Any]]:
        return [{"service": s, "instances": [{"id": i, "state": "running"} for i in ids]}
                for s, ids in sorted(self.services.items())]

    def describe_service(self, service: str) -> dict[str, Any]:
        return {"service": service, "instances": [{"id": i, "state": "running", "restarts": 0}
                                                  for i in self._instances(service)]}

    def restart(self, service: str, instance: str | None = None) -> dict[str, Any]:
        ids = self._instances(service)
        if instance is not None and instance not in ids:
            raise ToolError("not_found", f"instance: {service!r} has no instance {instance!r}; "
                            f"instances: {', '.join(ids)}", field="instance")
        targets = [instance] if instance else ids
        self.actions.append(("restart", *targets))
        return {"service": service, "restarted": targets}

    def scale(self, service: str, replicas: int) -> dict[str, Any]:
        ids = self._instances(service)
        self.services[service] = [f"{service}-{n}" for n in range(1, replicas + 1)]
        self.actions.append(("scale", service, str(replicas)))
        return {"service": service, "previous": len(ids), "replicas": replicas}

    def set_env(self, service: str, env: Mapping[str, str]) -> dict[str, Any]:
        self._instances(service)
        self.actions.append(("set_env", service, json.dumps(dict(env), sort_keys=True)))
        return {"service": service, "set": sorted(env)}

    def rollback(self, service: str) -> dict[str, Any]:
        self._instances(service)
        self.actions.append(("rollback", service))
        return {"service": service, "rolled_back": True}

    def list_flags(self) -> list[str]:
        return sorted(f for f in self.flags if not is_internal(f))

    def toggle_flag(self, flag: str, on: bool) -> dict[str, Any]:
        _check_flag(flag)
        if flag not in self.flags:
            raise ToolError("not_found", f"flag: no feature flag {flag!r}; flags: {', '.join(self.list_flags())}",
                            field="flag")
        previous, self.flags[flag] = self.flags[flag], "on" if on else "off"
        self.actions.append(("toggle_flag", flag, self.flags[flag]))
        return {"flag": flag, "previous": previous, "current": self.flags[flag]}


# -- podman (local backend) -----------------------------------------------------------------------------------------

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class PodmanControl:
    """The `local` backend's containers, through the podman CLI.

    A container is the application's when it carries the label `opsbench.run=<run id>`, its name starts with the
    run's container prefix, it has no `opsbench.fault` label (fault helpers) and neither its entity nor its service
    is machinery (load generator, Prometheus, Alertmanager, exporters). Only those are listed, described or
    restarted. `toggle_flag` edits the flagd file the services read.

    `set_env` and `rollback` recreate a service's instances from the deploy's recorded specs
    (`env/containers.json`) through the same helpers the fault roles use. `scale` starts or stops the deployed
    instances and adds or removes extra ones (`<service>-<n>`, labelled `opsbench.scaled`) made from the first
    instance's spec: they join the service's network alias, so callers reach them, and are listed in
    `env/config/scaled_targets.json`, which Prometheus reads (file_sd), so they are scraped like the others.
    """

    def __init__(self, run_id: str, container_prefix: str, flags_file: Path | None,
                 runner: Runner = subprocess.run, env: Mapping[str, str] | None = None,
                 timeout: float = 90.0, spec_file: Path | None = None) -> None:
        self.run_id = run_id
        self.prefix = container_prefix
        self.flags_file = flags_file
        self.spec_file = spec_file  # env/containers.json: how the deploy created each container
        self._run = runner
        self._env = dict(env) if env is not None else None
        self.timeout = timeout

    def _environment(self) -> dict[str, str]:
        """podman must use the project's containers.conf/storage.conf (runner.ansible_env), like the roles do."""
        if self._env is None:
            from orchestrator.runner import ansible_env

            self._env = {k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}
        return {**os.environ, **self._env}

    def _podman(self, *args: str) -> str:
        try:
            # cwd: conmon's, for its `oom` marker (podman_control's conmon_dir says why)
            proc = self._run(["podman", *args], capture_output=True, text=True, timeout=self.timeout,
                             env=self._environment(), check=False, cwd=podman_helpers().conmon_dir())
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolError("backend_error", f"podman {args[0]} failed: {exc}") from None
        if proc.returncode != 0:
            raise ToolError("backend_error", f"podman {args[0]} failed: {(proc.stderr or '').strip()[-500:]}")
        return proc.stdout or ""

    def _containers(self) -> list[dict[str, Any]]:
        """Every container of the run (application or not) as {entity, service, name, state, labels}."""
        out = self._podman("ps", "-a", "--filter", f"label={RUN_LABEL}={self.run_id}", "--format", "json")
        try:
            rows = json.loads(out or "[]")
        except ValueError:
            raise ToolError("backend_error", "podman ps answered something that is not JSON") from None
        found = []
        for row in rows:
            names = row.get("Names") or []
            name = names[0] if names else ""
            labels = row.get("Labels") or {}
            if not name.startswith(self.prefix) or labels.get(RUN_LABEL) != self.run_id:
                continue
            entity = labels.get("opsbench.entity") or name[len(self.prefix):]
            found.append({"entity": entity, "service": labels.get("opsbench.service") or entity, "name": name,
                          "state": row.get("State"), "status": row.get("Status"), "labels": labels})
        return found

    @staticmethod
    def _is_application(c: Mapping[str, Any]) -> bool:
        return FAULT_LABEL not in c["labels"] and not is_internal(c["entity"]) and not is_internal(c["service"])

    def _app_containers(self, service: str) -> list[dict[str, Any]]:
        if is_internal(service):
            raise denied(f"service: {service!r} is not part of the application", field="service")
        mine = [c for c in self._containers() if c["service"] == service and self._is_application(c)]
        if not mine:
            raise ToolError("not_found", f"service: no running or stopped container of {service!r} in this run",
                            field="service")
        return sorted(mine, key=lambda c: c["entity"])

    def list_services(self) -> list[dict[str, Any]]:
        services: dict[str, list[dict[str, Any]]] = {}
        for c in self._containers():
            if self._is_application(c):
                services.setdefault(c["service"], []).append(
                    {"id": c["entity"], "state": c["state"], "status": c["status"]})
        return [{"service": s, "instances": sorted(i, key=lambda x: str(x["id"]))}
                for s, i in sorted(services.items())]

    def describe_service(self, service: str) -> dict[str, Any]:
        containers = self._app_containers(service)
        out = self._podman("container", "inspect", *[c["name"] for c in containers])
        try:
            infos = json.loads(out or "[]")
        except ValueError:
            raise ToolError("backend_error", "podman inspect answered something that is not JSON") from None
        by_name = {str(i.get("Name", "")).lstrip("/"): i for i in infos}
        instances = [_describe(c["entity"], by_name.get(c["name"], {})) for c in containers]
        return {"service": service, "instances": instances}

    def restart(self, service: str, instance: str | None = None) -> dict[str, Any]:
        containers = self._app_containers(service)
        if instance is not None:
            if is_internal(instance):
                raise denied(f"instance: {instance!r} is not part of the application", field="instance")
            instance = instance.removeprefix(self.prefix)
            containers = [c for c in containers if c["entity"] == instance]
            if not containers:
                raise ToolError("not_found", f"instance: {service!r} has no instance {instance!r}; instances: "
                                f"{', '.join(c['entity'] for c in self._app_containers(service))}",
                                field="instance")
        self._podman("restart", *[c["name"] for c in containers])
        return {"service": service, "restarted": [c["entity"] for c in containers]}

    def scale(self, service: str, replicas: int) -> dict[str, Any]:
        """Run exactly `replicas` instances: deployed ones first (started/stopped), then extras (created/removed)."""
        common, specs = self._specs(service)
        if replicas < 0:
            raise ToolError("invalid", "replicas: must be 0 or more", field="replicas")
        everything = [c for c in self._containers() if c["service"] == service]
        live = {c["entity"]: c for c in everything if self._is_application(c)}
        deployed = [str(spec["id"]) for spec in specs]
        extras = sorted((e for e, c in live.items() if c["labels"].get(SCALED_LABEL)), key=_ordinal)
        taken = {_ordinal(e) for e in deployed} | {_ordinal(c["entity"]) for c in everything}
        wanted: list[str] = (deployed + extras)[:replicas]
        n = max(taken | {0})
        while len(wanted) < replicas:
            n += 1
            wanted.append(f"{service}-{n}")
        started, stopped, added, removed = [], [], [], []
        for entity in wanted:
            if entity not in live:
                self._add_instance(common, specs[0], entity)
                added.append(entity)
            elif live[entity]["state"] != "running":
                self._podman("start", live[entity]["name"])
                started.append(entity)
        for entity in deployed:
            if entity not in wanted and entity in live and live[entity]["state"] == "running":
                self._podman("stop", "--time", "3", live[entity]["name"])
                stopped.append(entity)
        leaving = [e for e in extras if e not in wanted]
        if leaving:  # Prometheus stops scraping them first: a removed instance is not an instance down
            self._write_scaled_targets(common, leaving=set(leaving))
        for entity in leaving:
            self._podman("rm", "--force", "--time", "1", live[entity]["name"])
            removed.append(entity)
        self._write_scaled_targets(common)
        return {"service": service, "replicas": replicas, "instances": wanted, "started": started,
                "stopped": stopped, "added": added, "removed": removed}

    def _add_instance(self, common: dict[str, Any], template: dict[str, Any], entity: str) -> None:
        """A new instance made like `template` (with its current changes, e.g. from set_env), minus published
        ports (they belong to one container), under its own name and instance identity."""
        helpers = podman_helpers()
        overrides = self._overrides(f"{common['prefix']}-{template['id']}")
        spec = {**helpers.apply_overrides(template, overrides), "id": entity, "publish": []}
        spec["env"] = {k: (entity if v == template["id"] else v) for k, v in (spec.get("env") or {}).items()}
        labels = {SCALED_LABEL: str(template.get("service", template["id"]))}
        if overrides:
            labels[helpers.OVERRIDES_LABEL] = json.dumps(overrides, sort_keys=True)
        self._podman(*helpers.run_args(spec, common, labels)[1:])

    def _write_scaled_targets(self, common: dict[str, Any], leaving: set[str] | None = None) -> None:
        """Prometheus's file_sd list of the extra instances (written whole, then renamed: never half a file),
        without those `leaving`."""
        if self.spec_file is None:
            return
        config = self.spec_file.parent / "config"
        if not config.is_dir():
            return
        targets = [{"targets": [f"{c['name']}:{SCRAPE_PORT}"],
                    "labels": {"service": c["service"], "instance_id": c["entity"]}}
                   for c in sorted(self._containers(), key=lambda c: str(c["entity"]))
                   if c["labels"].get(SCALED_LABEL) and self._is_application(c)
                   and c["entity"] not in (leaving or set())]
        fd, tmp = tempfile.mkstemp(dir=config, prefix=".scaled_targets.")
        with os.fdopen(fd, "w") as fh:
            json.dump(targets, fh, indent=1)
        os.chmod(tmp, 0o644)
        os.replace(tmp, config / SCALED_TARGETS)

    def _specs(self, service: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The deploy's common parameters and the specs of ``service``'s instances (env/containers.json)."""
        if is_internal(service):
            raise denied(f"service: {service!r} is not part of the application", field="service")
        if self.spec_file is None or not self.spec_file.is_file():
            raise ToolError("not_supported", "this environment recorded no container specs to recreate from")
        data = json.loads(self.spec_file.read_text())
        mine = [c for c in data["containers"] if c.get("service", c["id"]) == service and not is_internal(c["id"])]
        if not mine:
            raise ToolError("not_found", f"service: {service!r} has no containers in this run", field="service")
        return data["common"], sorted(mine, key=lambda c: str(c["id"]))

    def _recreate(self, common: dict[str, Any], spec: dict[str, Any], overrides: dict[str, Any]) -> None:
        """Replace one instance with a container made from its deployed spec plus ``overrides`` (recorded in
        the overrides label, so the fault roles' restore and the run's pristine check see the change)."""
        helpers = podman_helpers()
        name = f"{common['prefix']}-{spec['id']}"
        self._podman("rm", "--force", "--ignore", "--time", "1", name)
        labels = {helpers.OVERRIDES_LABEL: json.dumps(overrides, sort_keys=True)} if overrides else None
        self._podman(*helpers.run_args(helpers.apply_overrides(spec, overrides), common, labels)[1:])

    def _overrides(self, name: str) -> dict[str, Any]:
        try:
            info = json.loads(self._podman("container", "inspect", name) or "[]")
        except ToolError:
            return {}  # missing (e.g. its image never existed): nothing to keep
        labels = ((info[0] if info else {}).get("Config") or {}).get("Labels") or {}
        raw = labels.get(podman_helpers().OVERRIDES_LABEL)
        return dict(json.loads(raw)) if raw else {}

    def set_env(self, service: str, env: Mapping[str, str]) -> dict[str, Any]:
        """Recreate every instance with these variables set (on top of whatever else was changed)."""
        common, specs = self._specs(service)
        for spec in specs:
            overrides = self._overrides(f"{common['prefix']}-{spec['id']}")
            overrides["env"] = {**(overrides.get("env") or {}), **env}
            self._recreate(common, spec, overrides)
        return {"service": service, "recreated": [c["id"] for c in specs], "env": sorted(env)}

    def rollback(self, service: str) -> dict[str, Any]:
        """Recreate every instance exactly as deployed: image, command, environment, limits."""
        common, specs = self._specs(service)
        for spec in specs:
            self._recreate(common, spec, {})
        return {"service": service, "rolled_back": [c["id"] for c in specs], "image": specs[0]["image"]}

    def _flags_path(self) -> Path:
        if self.flags_file is None:
            raise ToolError("not_supported", "this environment has no feature flags file")
        return self.flags_file

    def list_flags(self) -> list[str]:
        flags = read_flags(self._flags_path()).get("flags", {})
        return sorted(f for f in flags if not is_internal(f))

    def toggle_flag(self, flag: str, on: bool) -> dict[str, Any]:
        _check_flag(flag)
        previous, current = set_flag_variant(self._flags_path(), flag, "on" if on else "off")
        return {"flag": flag, "previous": previous, "current": current}


def _ordinal(entity: str) -> int:
    """The n of `<service>-<n>` (0 when the entity has no number)."""
    tail = entity.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _describe(entity: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of `podman inspect` an operator would look at. Labels are left out: they carry the benchmark's
    bookkeeping (e.g. which fault recreated the container)."""
    state = info.get("State") or {}
    config = info.get("Config") or {}
    host = info.get("HostConfig") or {}
    env: dict[str, str] = {}
    for item in config.get("Env") or []:
        key, _, value = str(item).partition("=")
        env[key] = "[redacted]" if SECRET_KEY.search(key) else value
    policy = host.get("RestartPolicy") or {}
    return {
        "id": entity,
        "state": state.get("Status"),
        "running": bool(state.get("Running")),
        "paused": bool(state.get("Paused")),
        "oom_killed": bool(state.get("OOMKilled")),
        "exit_code": state.get("ExitCode"),
        "started_at": state.get("StartedAt"),
        "finished_at": state.get("FinishedAt"),
        "restarts": info.get("RestartCount", 0),
        "image": info.get("ImageName") or config.get("Image"),
        "command": config.get("Cmd"),
        "memory_limit_bytes": host.get("Memory") or None,
        "cpus": (host.get("NanoCpus") or 0) / 1e9 or None,
        "restart_policy": policy.get("Name") or None,
        "env": env,
    }
