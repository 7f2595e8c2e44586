"""The shop's generated datastore passwords never leave `<run dir>/secrets/` (issue 11, item 5), live.

A campaign of two shop scenarios whose faults handle those passwords (a client recreated with a wrong Redis password;
connections opened against PostgreSQL with its password) on one deployment. While the environment is up the test
reads what the deploy generated for the run (`secrets_scan.run_secrets`: the Redis and PostgreSQL passwords and the
agent's token; teardown deletes them). The agent describes every service through the gateway (the tool that shows
container environments, where the passwords are set) and prints the answers to its log, then runs the baseline
agent. After the campaign, no file under OPSBENCH_HOME (runner artifacts with their job events and `command` files,
step logs, the agent's logs, collected telemetry, evaluation) outside the agent's own workspace, and no row of the
SQLite index, holds any of those values, nor a private key or kubeconfig credential.

Marked `reliability` (with `e2e`): a shop deployment plus two trials takes about 6-7 min on the 2-core dev machine,
over `make test`'s budget; `make reliability` runs it.
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

pytestmark = [pytest.mark.e2e, pytest.mark.reliability]
SCENARIOS = ["shop-cart-redis-wrong-password", "shop-postgres-connections-exhausted"]
NOSY_AGENT = """\
import json, os, pathlib, subprocess, sys
sys.path.insert(0, {root!r})
from orchestrator.agents.heuristic import GatewayClient, ToolError
m = json.load(open(os.environ['OPSBENCH_MANIFEST']))
token = pathlib.Path(m['token_file']).read_text().strip()
pathlib.Path('token.txt').write_text(token)
call = GatewayClient(m['tools']['url'], token)
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
            found.update(run_secrets(run_dir))
        time.sleep(0.5)


def test_shop_passwords_stay_secret(home: Path, tmp_path: Path) -> None:
    agent = tmp_path / "nosy_agent.py"
    agent.write_text(NOSY_AGENT.format(root=str(paths.PROJECT_ROOT)))
    found: dict[str, str] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=collect_secrets, args=(home / "runs", found, stop), daemon=True)
    watcher.start()
    try:
        proc = subprocess.run([*OPSBENCH, "campaign", *SCENARIOS, "--name", "shop-secrets", "--agent",
                               f"{sys.executable} {agent}", "--json", "--quiet"], env=cli_env(home),
                              cwd=paths.PROJECT_ROOT, capture_output=True, text=True, timeout=1500, check=False)
    finally:
        stop.set()
        watcher.join(5)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    names = {key.rsplit("/", 1)[1] for key in found}
    assert {"redis_password", "postgres_password"} <= names, sorted(found)  # the deploy generated them
    assert all(len(v) >= 20 for k, v in found.items() if k.endswith("_password")), "passwords too short to scan"
    assert not list(home.rglob("secrets/*_password")), "teardown left the passwords behind"

    # The agent did ask for the environments the passwords are set in (so a leak there would have been seen).
    logs = "".join(p.read_text(errors="replace") for p in home.rglob("agent/*") if p.is_file())
    assert '"REDIS_PASSWORD": "[redacted]"' in logs, "the agent never saw a container environment"

    workspaces = [p.parent for p in home.rglob("workspace/token.txt")]
    assert workspaces, "the agent kept no token"
    tokens = {f"token of {p.parts[-4]}": p.read_text().strip() for p in home.rglob("workspace/token.txt")}
    secrets = {**found, **tokens}
    files, findings = scan_files([home], secrets, skip=workspaces)
    rows, db_findings = scan_sqlite(home / "opsbench.db", secrets)
    report = {"secrets": len(secrets), "files": files, "rows": rows,
              "findings": [f"{f.where}: {f.what}" for f in findings + db_findings]}
    print(f"shop secrets scan: {report}")
    assert files > 100 and rows > 10, report
    assert findings == [] and db_findings == [], report
