"""podman_control's pure parts: container specs with overrides, rule filters, the fault proxy."""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from orchestrator import paths

ROLE = paths.ROLES_DIR / "podman_control"


def load(name: str, rel: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROLE / rel)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


podman = load("opsbench_podman", "module_utils/opsbench_podman.py")
rules = load("opsbench_rules", "filter_plugins/opsbench_rules.py")

SPEC = {"id": "cart-1", "service": "cart", "image": "localhost/opsbench-shop:current", "aliases": ["cart"],
        "env": {"SHOP_SERVICE": "cart", "REDIS_ADDR": "redis:6379"}, "secrets": {"REDIS_PASSWORD": "redis_password"}}
COMMON = {"prefix": "ob-r1", "network": "ob-r1", "memory": "256m", "labels": {"opsbench.run": "r1"},
          "volumes": ["/x:/flags:ro"]}


def test_overrides_merge_env_and_secrets_and_replace_the_rest() -> None:
    out = podman.apply_overrides(SPEC, {"env": {"REDIS_ADDR": "redis:6380"}, "memory": "12m",
                                        "secrets": {"REDIS_PASSWORD": "wrong"}, "image_tag": "v9"})
    assert out["env"] == {"SHOP_SERVICE": "cart", "REDIS_ADDR": "redis:6380"}
    assert out["secrets"] == {"REDIS_PASSWORD": "wrong"}
    assert out["memory"] == "12m" and out["image"] == "localhost/opsbench-shop:v9"
    assert SPEC["env"]["REDIS_ADDR"] == "redis:6379"  # the deployed spec is never modified


def test_run_args_carry_identity_labels_limits_and_overrides() -> None:
    args = podman.run_args(podman.apply_overrides(SPEC, {"restart": "on-failure:3", "memory": "12m"}), COMMON,
                           {podman.OVERRIDES_LABEL: '{"memory": "12m"}'})
    joined = " ".join(args)
    assert args[:5] == ["podman", "run", "-d", "--name", "ob-r1-cart-1"]
    assert "--memory 12m" in joined and "--restart on-failure:3" in joined
    assert "--network ob-r1:alias=cart" in joined
    assert "--secret ob-r1-redis_password,type=env,target=REDIS_PASSWORD" in joined
    assert "--label opsbench.run=r1" in joined and "--label opsbench.entity=cart-1" in joined
    assert f"--label {podman.OVERRIDES_LABEL}=" in joined
    assert args[-1] == "localhost/opsbench-shop:current"  # no command: the image's own
    tuned = podman.run_args(podman.apply_overrides(SPEC, {"sysctls": {"net.ipv4.ip_local_port_range": "40000 40007"}}),
                            COMMON)
    assert tuned[tuned.index("--sysctl") + 1] == "net.ipv4.ip_local_port_range=40000 40007"
    assert "--sysctl" not in args


def test_rule_filters() -> None:
    assert rules.opsbench_drop_rule("10.0.0.5")["args"] == ["-s", "10.0.0.5", "-j", "DROP"]
    lossy = rules.opsbench_drop_rule("10.0.0.5", 0.3)["args"]
    assert lossy[lossy.index("--probability") + 1] == "0.3000"
    dnat = rules.opsbench_dnat_rule(("10.0.0.7", 9001), "10.0.0.9", 8080)
    assert dnat["table"] == "nat" and dnat["chain"] == "OUTPUT"
    assert dnat["args"][-2:] == ["--to-destination", "10.0.0.9:9001"] and "10.0.0.7" in dnat["args"]
    big = rules.opsbench_size_drop_rule("10.0.0.7", 1200)
    assert big["chain"] == "INPUT" and big["args"] == ["-s", "10.0.0.7", "-p", "tcp", "--sport", "8080", "-m", "length",
                                                       "--length", "1201:65535", "-j", "DROP"]


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"ok": true, "items": [1, 2, 3]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def proxied(upstream: int, *mode: str) -> tuple[int, bytes, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROLE / "files" / "fault_proxy.py"),
                             f"--map={port}=127.0.0.1:{upstream}", *mode], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "fault proxy" in proc.stdout.readline()
        start = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/x", timeout=10) as resp:
                return resp.status, resp.read(), time.monotonic() - start
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), time.monotonic() - start
    finally:
        proc.terminate()
        proc.wait(5)


def test_proxy_delay_forwards_after_the_delay(upstream: int) -> None:
    status, body, secs = proxied(upstream, "--mode=delay", "--delay-ms=300")
    assert status == 200 and body == b'{"ok": true, "items": [1, 2, 3]}' and secs >= 0.3


def test_proxy_abort_answers_itself(upstream: int) -> None:
    status, body, _ = proxied(upstream, "--mode=abort", "--probability=1", "--status=503")
    assert status == 503 and b"upstream connect error" in body


def test_proxy_tamper_keeps_status_and_length_but_breaks_the_body(upstream: int) -> None:
    status, body, _ = proxied(upstream, "--mode=tamper", "--probability=1")
    original = b'{"ok": true, "items": [1, 2, 3]}'
    assert status == 200 and len(body) == len(original) and body != original
    with pytest.raises(ValueError):
        json.loads(body)


def edge(upstream: int, path: str, *mode: str, method: str = "GET") -> tuple[int, dict[str, str], bytes | str]:
    """One request through the proxy in edge mode: status, headers, body (or the read error's name when the body
    arrived cut)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROLE / "files" / "fault_proxy.py"),
                             f"--map={port}=127.0.0.1:{upstream}", "--mode=edge", *mode], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and "fault proxy" in proc.stdout.readline()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(method, path)
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        try:
            body: bytes | str = resp.read()
        except http.client.IncompleteRead as exc:
            body = f"IncompleteRead after {len(exc.partial)} bytes"
        conn.close()
        return resp.status, headers, body
    finally:
        proc.terminate()
        proc.wait(5)


ORIGINAL = b'{"ok": true, "items": [1, 2, 3]}'


def test_edge_rules_touch_only_matching_requests(upstream: int) -> None:
    status, _, body = edge(upstream, "/api/cart?user=1", "--path-re=^/api/cart$", "--action=status", "--status=503")
    assert status == 503 and json.loads(body) == {"error": "Service Unavailable"}
    assert edge(upstream, "/api/cartx", "--path-re=^/api/cart$", "--action=status")[::2] == (200, ORIGINAL)
    # A method filter: the rule is for POST only, this GET passes untouched.
    assert edge(upstream, "/api/cart", "--path-re=^/api/cart$", "--method=POST", "--action=status")[::2] == (
        200, ORIGINAL)


def test_edge_mutate_truncate_drop_header_and_delay(upstream: int) -> None:
    status, headers, body = edge(upstream, "/p", "--path-re=^/p$", "--action=mutate", '--find="items"',
                                 '--replace="things"')
    assert status == 200 and body == b'{"ok": true, "things": [1, 2, 3]}'
    assert headers["content-length"] == str(len(body)), "the length follows the new body"
    status, headers, body = edge(upstream, "/p", "--path-re=^/p$", "--action=truncate", "--keep-bytes=5")
    assert status == 200 and headers["content-length"] == str(len(ORIGINAL)) and body == "IncompleteRead after 5 bytes"
    _, headers, body = edge(upstream, "/p", "--path-re=^/p$", "--action=drop-header", "--header=Content-Type")
    assert "content-type" not in headers and body == ORIGINAL
    start = time.monotonic()
    assert edge(upstream, "/p", "--path-re=^/p$", "--action=delay", "--delay-ms=300")[0] == 200
    assert time.monotonic() - start >= 0.3



def test_edge_segment_matches_the_query_or_the_body_only(upstream: int) -> None:
    """One customer segment: the rule needs the path and the segment; other segments of the same path pass."""
    rule = ("--path-re=^/convert$", "--segment-re=(^|&)to=JPY(&|$)", "--action=status", "--status=503")
    assert edge(upstream, "/convert?from=USD&to=JPY&amount=3", *rule)[0] == 503
    assert edge(upstream, "/convert?from=USD&to=EUR&amount=3", *rule)[::2] == (200, ORIGINAL)
    assert edge(upstream, "/convert?from=JPY&to=EUR", *rule)[::2] == (200, ORIGINAL)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=catalog",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


def test_tls_mode_refuses_plaintext_and_forwards_tls(upstream: int, cert: tuple[Path, Path]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROLE / "files" / "fault_proxy.py"),
                             f"--map={port}=127.0.0.1:{upstream}", "--mode=tls", f"--cert={cert[0]}",
                             f"--key={cert[1]}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and "fault proxy" in proc.stdout.readline()
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            plain.request("GET", "/x")
            plain.getresponse().read()
        plain.close()
        ctx = ssl.create_default_context(cafile=str(cert[0]))
        ctx.check_hostname = False
        secure = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
        secure.request("GET", "/x")
        resp = secure.getresponse()
        assert (resp.status, resp.read()) == (200, ORIGINAL)
        secure.close()
    finally:
        proc.terminate()
        proc.wait(5)


changes = load("opsbench_changes", "module_utils/opsbench_changes.py")


def test_the_change_journal_appends_lines_with_stable_id_prefixes(tmp_path: Path) -> None:
    journal = tmp_path / "changes.jsonl"
    first = changes.append_change(str(journal), "flags", "flag", "feature flag cartServiceFailure: on",
                                  key="cartServiceFailure", when=1_700_000_000.1234)
    changes.append_change(str(journal), "frontend", "release", "frontend release 1: product.js updated",
                          key="product.js", details={"asset": "product.js"}, source="release pipeline")
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert first["id"] == "change:flags:cartServiceFailure:1700000000123" and lines[0] == first
    assert lines[1]["id"].startswith("change:frontend:product.js:") and lines[1]["source"] == "release pipeline"
    assert journal.stat().st_mode & 0o777 == 0o644


def test_pristine_names_assets_changed_missing_or_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ansible.module_utils.opsbench_podman", podman)
    leftovers = load("opsbench_leftovers", "library/opsbench_leftovers.py")
    source, live = tmp_path / "source", tmp_path / "live"
    for d in (source, live):
        d.mkdir()
        (d / "app.js").write_text("ok")
        (d / "cart.js").write_text("ok")
    assert leftovers.static_leftovers(str(live), str(source)) == []
    (live / "app.js").write_text("changed")
    (live / "cart.js").unlink()
    (live / "extra.js").write_text("new")
    assert leftovers.static_leftovers(str(live), str(source)) == [
        f"asset cart.js missing from {live}", f"asset extra.js in {live} was not deployed",
        "asset app.js differs from its deployed version"]
