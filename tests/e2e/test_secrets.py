"""Generated datastore passwords never leave `<run dir>/secrets/` (issue 11, item 5), live.

While the environment is up, the test keeps reading what the deploy generated for the run
(`secrets_scan.run_secrets`: every file under `<run dir>/secrets/`, which teardown deletes): the agent's token and
- for the shop, the Redis and PostgreSQL passwords, in a campaign of two shop scenarios whose faults handle them (a
  client recreated with a wrong Redis password; a runaway client connecting to PostgreSQL with its password) on one
  deployment. The agent describes every service through the gateway (the tool that shows container environments,
  where the passwords are set), prints the answers to its log, then runs the baseline agent;
- for the FinOps PostgreSQL store, the billing owner's and reader's passwords, in one run with the domain's baseline
  agent.
After the run(s), no file under OPSBENCH_HOME (runner artifacts with their job events and `command` files, step
logs, the agent's logs, collected telemetry, evaluation) and no row of the SQLite index holds any of those values,
nor a private key or kubeconfig credential. Nothing is skipped: the agents here keep no secret in their workspace.

Budgets: the FinOps case is in `make test` (e2e, 48 s); the shop case, a shop deployment plus two trials (224 s on
the 2-core dev machine, 20:27-20:31 UTC), is marked `reliability` too: `make reliability` runs it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator import paths
from orchestrator.secrets_scan import run_secrets, scan_files, scan_sqlite

from .conftest import OPSBENCH, cli_env

pytestmark = [pytest.mark.e2e]
NOSY_AGENT = """\
import json, os, pathlib, subprocess, sys
sys.path.insert(0, {root!r})
from orchestrator.agents.gateway_client import GatewayClient, ToolError
m = json.load(open(os.environ['OPSBENCH_MANIFEST']))
call = GatewayClient(m['tools']['url'], pathlib.Path(m['token_file']).read_text().strip())
for svc in call('list_services')['services']:
    try:
        print(json.dumps(call('describe_service', service=svc['service'])))
    except ToolError as exc:
        print(exc)
sys.exit(subprocess.call([sys.executable, '-m', 'orchestrator.agents.heuristic']))
"""


def collect_secrets(runs: Path, found: dict[str, str], stop: threading.Event) -> None:
    """Keep reading every run's generated secrets while the campaign runs (teardown deletes them)."""
    while not stop.is_set():
        for run_dir in runs.glob("*") if runs.is_dir() else []:
            for name, value in run_secrets(run_dir).items():
                if value not in found.values():  # each trial's agent token is a new value under the same name
                    found[name if name not in found else f"{name} #{len(found)}"] = value
        time.sleep(0.2)


def campaign_and_scan(home: Path, scenarios: list[str], agent: list[str], generated: set[str]
                      ) -> tuple[dict[str, object], list[str]]:
    """Run the campaign while collecting the secrets; (scan report, findings)."""
    found: dict[str, str] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=collect_secrets, args=(home / "runs", found, stop), daemon=True)
    watcher.start()
    try:
        proc = subprocess.run([*OPSBENCH, "campaign", *scenarios, "--name", "scan", *agent, "--json", "--quiet"],
                              env=cli_env(home), cwd=paths.PROJECT_ROOT, capture_output=True, text=True,
                              timeout=1500, check=False)
    finally:
        stop.set()
        watcher.join(5)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    names = {key.rsplit("/", 1)[1].split(" ")[0] for key in found}
    assert generated | {"agent_token"} <= names, sorted(found)  # the deploy generated them, the test saw them
    assert all(len(v) >= 20 for v in found.values()), "secrets too short to scan for"
    assert not list((home / "runs").rglob("secrets/*")), "teardown left secrets behind"
    files, findings = scan_files([home], found)
    rows, db_findings = scan_sqlite(home / "opsbench.db", found)
    report: dict[str, object] = {"secrets": sorted(found), "files": files, "rows": rows}
    assert files > 50 and rows > 5, report  # the runner artifacts and the phase rows were among them
    return report, [f"{f.where}: {f.what}" for f in findings + db_findings]


@pytest.mark.reliability
def test_shop_passwords_stay_secret(home: Path, tmp_path: Path) -> None:
    agent = tmp_path / "nosy_agent.py"
    agent.write_text(NOSY_AGENT.format(root=str(paths.PROJECT_ROOT)))
    report, findings = campaign_and_scan(
        home, ["shop-cart-redis-wrong-password", "shop-postgres-connections-exhausted"],
        ["--agent", f"{sys.executable} {agent}"], {"redis_password", "postgres_password"})
    print(f"shop secrets scan: {report}, findings: {findings}")
    tokens = [k for k in report["secrets"] if "/agent_token" in k]  # type: ignore[attr-defined]
    assert len(tokens) == 2, report  # one per trial
    # The agent did see the container environments the passwords are set in (so a leak there would have shown).
    logs = "".join(p.read_text(errors="replace") for p in home.rglob("agent/stdout.log"))
    assert '"REDIS_PASSWORD": "[redacted]"' in logs, "the agent never saw a container environment"
    assert findings == [], findings


def test_finops_postgres_passwords_stay_secret(home: Path) -> None:
    report, findings = campaign_and_scan(home, ["finops-top-applications-postgres"], [],
                                         {"billing_owner", "billing_reader"})
    print(f"finops postgres secrets scan: {report}, findings: {findings}")
    assert findings == [], findings
