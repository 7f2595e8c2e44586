#!/usr/bin/env python3
"""loopweb's web service: a small catalog API on loopback, configured by web.json.

Routes: / and /products (the catalog), /healthz, /metrics (Prometheus text format).
Logs one JSON line per request on stdout.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

with open(sys.argv[1]) as config_file:
    CONFIG = json.load(config_file)
COUNTS: dict = {}


class Handler(BaseHTTPRequestHandler):
    server_version = "loopweb-web/1"

    def _send(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        start = time.time()
        if self.path in ("/", "/products"):
            status, body = 200, json.dumps({"service": CONFIG["name"], "products": CONFIG["products"]})
        elif self.path == "/healthz":
            status, body = 200, json.dumps({"status": "ok"})
        elif self.path == "/metrics":
            lines = ["# TYPE loopweb_requests_total counter"]
            lines += [f'loopweb_requests_total{{path="{p}",code="{c}"}} {n}' for (p, c), n in COUNTS.items()]
            status, body = 200, "\n".join(lines) + "\n"
            self._send(status, body, "text/plain; version=0.0.4")
            return
        else:
            status, body = 404, json.dumps({"error": "not found"})
        COUNTS[(self.path, status)] = COUNTS.get((self.path, status), 0) + 1
        self._send(status, body)
        print(json.dumps({"ts": start, "path": self.path, "status": status,
                          "ms": round((time.time() - start) * 1000, 2)}), flush=True)

    def log_message(self, *args):  # structured log line above instead
        pass


ThreadingHTTPServer(("127.0.0.1", CONFIG["port"]), Handler).serve_forever()
