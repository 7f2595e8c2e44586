"""open_session: every baseline agent's start (manifest, gateway, output file), and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.agents.gateway_client import open_session


def manifest_file(tmp_path: Path, **fields: object) -> Path:
    (tmp_path / "token").write_text("s3cr3t\n")
    doc = {"tools": {"url": "http://127.0.0.1:9/", "mcp_url": "http://127.0.0.1:9/mcp"},
           "token_file": str(tmp_path / "token"), "output": {"path": str(tmp_path / "out.json")}, **fields}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_session_holds_the_gateway_and_writes_where_the_manifest_says(tmp_path: Path) -> None:
    session = open_session({"OPSBENCH_MANIFEST": str(manifest_file(tmp_path))})
    assert (session.url, session.mcp_url, session.token) == ("http://127.0.0.1:9/", "http://127.0.0.1:9/mcp", "s3cr3t")
    session.write({"schema": "x", "n": 1})
    assert json.loads((tmp_path / "out.json").read_text()) == {"schema": "x", "n": 1}


def test_opsbench_output_wins_over_the_manifest(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    session = open_session({"OPSBENCH_MANIFEST": str(manifest_file(tmp_path)), "OPSBENCH_OUTPUT": str(elsewhere)})
    session.write({"ok": True})
    assert elsewhere.exists() and not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(("environ", "says"), [
    ({}, "OPSBENCH_MANIFEST is not set"),
    ("no-gateway", "names no tool gateway (manifest.tools.url)"),
])
def test_a_missing_manifest_or_gateway_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         environ: object, says: str) -> None:
    env = {} if environ == {} else {"OPSBENCH_MANIFEST": str(manifest_file(tmp_path, tools={}))}
    with pytest.raises(SystemExit) as stopped:
        open_session(env)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    if env:
        assert str(tmp_path / "manifest.json") in err  # which manifest
