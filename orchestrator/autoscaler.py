"""The shop's autoscaler: a control loop that scales services from their CPU utilisation.

Started on the host by role `finops_autoscaler` (entry point `start`) and stopped by its `stop` (the environment's
teardown). Every `interval_seconds` it re-reads the policy file (orchestrator/finops/cost.py), asks the run's
Prometheus for each policed service's CPU used / CPU requested (the cost model's recording rules), applies the HPA
rule (`cost.recommend`, scale-down stabilisation `cost.stabilised`) and, when the count changes, scales through the
tool gateway's own backend (`PodmanControl.scale`: extra instances labelled `opsbench.scaled`, listed in
`env/config/scaled_targets.json`). A policy that does not parse is logged and the last good one kept.

    python -m orchestrator.autoscaler --run-dir DIR --run-id ID --prometheus URL [--once]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from orchestrator.finops import cost

UTILISATION = ('sum(opsbench:container_cpu_usage_cores{{service="{s}"}}) '
               '/ sum(opsbench:container_cpu_request_cores{{service="{s}"}})')


def utilisation(prometheus: str, service: str) -> float | None:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": UTILISATION.format(s=service)})
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            result = json.load(resp)["data"]["result"]
        return float(result[0]["value"][1]) if result else None
    except (OSError, ValueError, KeyError, IndexError):
        return None


class Autoscaler:
    def __init__(self, run_dir: Path, run_id: str, prometheus: str) -> None:
        from orchestrator.gateway.control import PodmanControl

        env = json.loads((run_dir / "environment.json").read_text())
        control = env.get("control") or {}
        self.control = PodmanControl(run_id, str(control["container_prefix"]), None,
                                     spec_file=run_dir / "env" / "containers.json")
        self.prometheus = prometheus
        self.policy_file = run_dir / "env" / "finops" / "policy.json"
        self.status_file = run_dir / "env" / "finops" / "autoscaler-status.json"
        self.policy: dict[str, Any] | None = None
        self.history: dict[str, list[tuple[float, int]]] = {}
        self.last_error = ""

    def running(self) -> dict[str, int]:
        return {s["service"]: sum(1 for i in s["instances"] if i.get("state") == "running")
                for s in self.control.list_services()}

    def step(self) -> dict[str, Any]:
        try:
            self.policy = cost.read_policy(self.policy_file)
            self.last_error = ""
        except cost.PolicyError as exc:
            self.last_error = str(exc)
            log(f"policy not applied, keeping the last good one: {exc}")
        status: dict[str, Any] = {"time": time.time(), "policy_error": self.last_error or None, "services": {}}
        if self.policy is None:
            cost.write_atomic(self.status_file, json.dumps(status, indent=2, sort_keys=True) + "\n")
            return status
        try:
            running = self.running()
        except Exception as exc:  # podman failed this time: say so, try again next loop
            status["error"] = str(exc)[:300]
            log(f"cannot list the services: {exc}")
            cost.write_atomic(self.status_file, json.dumps(status, indent=2, sort_keys=True) + "\n")
            return status
        window = float(self.policy.get("scale_down_stabilization_seconds", 30))
        for service, rule in sorted(self.policy["services"].items()):
            current = running.get(service, 0)
            util = utilisation(self.prometheus, service)
            desired = cost.recommend(current, util, rule, float(self.policy.get("tolerance", 0.1)))
            final = cost.stabilised(self.history.setdefault(service, []), time.time(), window, current, desired)
            entry = {"replicas": current, "cpu_utilisation_percent": None if util is None else round(util * 100, 1),
                     "target_cpu_percent": rule["target_cpu_percent"], "desired": final}
            if final != current and current > 0:
                try:
                    self.control.scale(service, final)
                    entry["scaled"] = f"{current} -> {final}"
                    log(f"{service}: {current} -> {final} replicas (cpu {entry['cpu_utilisation_percent']}% of "
                        f"requests, target {rule['target_cpu_percent']}%)")
                except Exception as exc:  # a failed podman call must not end the loop
                    entry["error"] = str(exc)[:300]
                    log(f"{service}: scaling to {final} failed: {exc}")
            status["services"][service] = entry
        cost.write_atomic(self.status_file, json.dumps(status, indent=2, sort_keys=True) + "\n")
        return status

    def interval(self) -> float:
        return float((self.policy or {}).get("interval_seconds", 5)) or 5.0


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.autoscaler")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--once", action="store_true", help="one loop, print the status, exit")
    args = parser.parse_args(argv)
    scaler = Autoscaler(args.run_dir, args.run_id, args.prometheus)
    if args.once:
        print(json.dumps(scaler.step(), indent=2))
        return 0
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log(f"autoscaler of run {args.run_id} started")
    while not stop["now"]:
        try:
            scaler.step()
        except Exception as exc:  # keep the loop alive; the status file shows the last good step
            log(f"loop error: {exc}")
        deadline = time.monotonic() + scaler.interval()
        while not stop["now"] and time.monotonic() < deadline:
            time.sleep(0.2)
    log("autoscaler stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
