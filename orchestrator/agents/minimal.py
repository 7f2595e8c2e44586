"""The smallest complete OpsBench agent: copy it to start your own.

Reads the manifest, asks the run's tool gateway for the firing alerts, blames the service of
the first critical one and writes a diagnosis. Standard library only.
Run: ``opsbench run shop-cart-down --agent "python -m orchestrator.agents.minimal"``.
"""

import json
import os
import urllib.request
from pathlib import Path

manifest = json.loads(Path(os.environ["OPSBENCH_MANIFEST"]).read_text())
token = Path(manifest["token_file"]).read_text().strip()


def tool(name: str, **args: object) -> object:
    """Call one gateway tool over REST; returns its result (raises on HTTP errors)."""
    req = urllib.request.Request(f"{manifest['tools']['url']}/v1/tools/{name}", data=json.dumps(args).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["result"]


alerts = tool("get_alerts")["items"]  # type: ignore[index]
critical = [a for a in alerts if a["labels"].get("severity") == "critical"] or alerts
blamed = critical[0]["labels"].get("instance_id") or critical[0]["labels"]["service"] if critical else None
output = {"schema": "opsbench/diagnosis/v1", "incident": blamed is not None,
          "entities": [{"id": blamed, "root_cause": True}] if blamed else [],
          "alerts_explained": sorted({a["labels"]["alertname"] for a in alerts}),
          "explanation": f"first critical alert: {critical[0]['labels']['alertname']}" if critical else "no alerts"}
Path(os.environ["OPSBENCH_OUTPUT"]).write_text(json.dumps(output))
