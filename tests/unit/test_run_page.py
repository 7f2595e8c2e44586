"""The per-run page (orchestrator/run_page.py: `opsbench show RUN --html`, `report --run-pages`), the report's
ITBench-AA columns (turns, tokens, cost per trial), and `opsbench export` (orchestrator/export.py), on the recorded
Gemini CLI replay trial (tests/data/runs/gemini-cli-replay) and a command agent's trial made from it."""

from __future__ import annotations

import base64
import json
import re
import tarfile
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner
from recorded_runs import command_trial, preset_trial

from orchestrator import atif, report, results, run_page
from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def text(html: str) -> str:
    """The page's text, tags dropped, entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def timeline_rows(html: str) -> list[str]:
    body = html.split('<section id="timeline">', 1)[1].split("</section>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)


def test_a_preset_run_page_shows_every_model_turn_with_tokens_cost_latency_and_the_calls(tmp_path: Path) -> None:
    _, run_dir = preset_trial(tmp_path)
    html = run_page.render(run_dir)
    models = lines(run_dir / "gateway" / "model-calls.jsonl")
    rows = timeline_rows(html)
    assert len(rows) == 1 + len(models)  # the prompt, then one row per counted model call
    preset = json.loads((run_dir / "agent" / "preset.json").read_text())
    assert "prompt" in text(rows[0]) and preset["prompt"][:60] in unescape(rows[0])
    for row, call in zip(rows[1:], models, strict=True):
        cells = text(row)
        assert f"{call['input_tokens']:,}" in cells and f"{call['output_tokens']:,}" in cells, cells
        assert f"{call['cached_tokens']:,}" in cells and f"${call['cost_usd']:.4f}" in cells
        assert f"{call['latency']:.2f}" in cells and "scripted-model" in cells
    # the tool calls the model asked for: the CLI's shell (no answer recorded), the MCP tool with the gateway's answer
    assert "run_shell_command" in text(rows[1]) and "its result is not recorded" in text(rows[1])
    assert "gt-exit=$?" in unescape(rows[1])
    mcp = unescape(rows[2])
    assert "mcp_opsbench_get_alerts" in mcp and "(gateway, 0.00 s)" in text(rows[2])
    assert "<summary>answer</summary>" in mcp and "ContainerNotRunning" in mcp
    assert "said: done" in text(rows[4])
    summary = text(html.split('<section id="summary">', 1)[1].split("</section>", 1)[0])
    total = sum(float(str(m["cost_usd"])) for m in models)
    assert "Outcome correct" in summary and f"Model turns {len(models)}" in summary
    assert f"Cost ${total:.4f}" in summary and "gemini-cli 0.61.0, model scripted-model" in summary


def test_the_answer_stands_beside_the_ground_truth_and_each_score_has_its_reason(tmp_path: Path) -> None:
    _, run_dir = preset_trial(tmp_path)
    html = run_page.render(run_dir)
    answer = html.split('<section id="answer">', 1)[1].split("</section>", 1)[0]
    left, right = answer.split("<h3>Ground truth</h3>", 1)
    assert '"root_cause": true' in unescape(left) and "rootCause: true" in unescape(right)
    assert "scenario_specs/shop-cart-down/ground_truth.yaml" in right
    scores = text(html.split('<section id="scores">', 1)[1])
    assert re.search(r"diagnosis fl_pass 1 1 when the root causes named are exactly the ground truth's .*named "
                     r"cart-1; the ground truth's root cause is cart-1", scores), scores
    assert "process cost_usd 0.03483 dollars, from the price table" in scores
    assert "process model_calls 4 model turns the recording proxy counted" in scores


def test_a_command_agent_page_has_one_row_per_tool_call_and_names_a_wrong_answer(tmp_path: Path) -> None:
    _, run_dir = command_trial(tmp_path)
    html = run_page.render(run_dir)
    rows = timeline_rows(html)
    assert len(rows) == 2 and "tool call" in text(rows[1]) and "get_alerts" in text(rows[1])
    summary = text(html.split('<section id="summary">', 1)[1].split("</section>", 1)[0])
    assert "Outcome wrong" in summary and "Cost — (no model call counted)" in summary
    assert "named frontend; the ground truth's root cause is cart-1" in text(html)


def test_markup_in_the_records_is_shown_as_text(tmp_path: Path) -> None:
    _, run_dir = preset_trial(tmp_path)
    calls = run_dir / "gateway" / "model-calls.jsonl"
    records = lines(calls)
    records[-1]["reply"] = {"text": "<script>alert(1)</script><img src=x>", "tool_calls": []}
    calls.write_text("".join(json.dumps(r) + "\n" for r in records))
    html = run_page.render(run_dir)
    assert "<script>" not in html and "<img src=x>" not in html and "&lt;script&gt;alert(1)" in html


def test_a_view_screenshot_answer_shows_the_picture(tmp_path: Path) -> None:
    _, run_dir = command_trial(tmp_path)
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5Erk"
                           "Jggg==")
    shot = run_dir / "cuj" / "checkout" / "step-02-pay.png"
    shot.parent.mkdir(parents=True)
    shot.write_bytes(png)
    trajectory = run_dir / "gateway" / "trajectory.jsonl"
    [ok] = lines(trajectory)
    view = {**ok, "ts": float(str(ok["ts"])) + 1, "tool": "view_screenshot", "args": {"journey": "checkout",
                                                                                        "step": "pay"}}
    trajectory.write_text(json.dumps(ok) + "\n" + json.dumps(view) + "\n")
    html = run_page.render(run_dir)
    assert html.count('<img class="shot"') == 1
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in html


def test_a_directory_without_run_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(atif.AtifError, match="not a run directory"):
        run_page.render(tmp_path)


def test_show_html_writes_the_page(tmp_path: Path) -> None:
    run_id, run_dir = preset_trial(tmp_path)
    out = tmp_path / "pages" / "run.html"
    done = CliRunner().invoke(main, ["show", run_id, "--html", str(out)])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"wrote {out}" and out.read_text() == run_page.render(run_dir)
    done = CliRunner().invoke(main, ["show", "no-such-run", "--html", str(out)])
    assert done.exit_code == 2 and "no run 'no-such-run'" in done.output


def test_the_report_has_cost_columns_and_links_a_page_per_run(tmp_path: Path) -> None:
    preset_id, _ = preset_trial(tmp_path, "p1")
    command_id, _ = command_trial(tmp_path, "c1")
    trials = results.load_trials()
    out = report.write(tmp_path / "out" / "report.html", trials, run_pages=True)
    html = out.read_text()
    board = html.split('<section id="leaderboard">', 1)[1].split("</section>", 1)[0]
    assert "Turns per trial" in board and "Cost per trial ($)" in board
    rows = [text(r.replace("<wbr>", "")) for r in re.findall(r"<tr>(.*?)</tr>", board, re.S)[1:]]
    [preset] = [r for r in rows if "gemini-cli" in r]
    [command] = [r for r in rows if "orchestrator.agents.heuristic" in r]
    assert preset.endswith("4.0 12,600 / 234 0.0348 ") and command.endswith("— — — "), rows
    section = html.split('<section id="runs">', 1)[1]
    for run_id in (preset_id, command_id):
        assert f'href="report-runs/{run_id}.html"' in section
        page = (tmp_path / "out" / "report-runs" / f"{run_id}.html").read_text()
        assert '<a href="../report.html">' in page
    preset_page = (tmp_path / "out" / "report-runs" / f"{preset_id}.html").read_text()
    assert preset_page.count('<span class="kind model">model turn</span>') == 4
    # without --run-pages: one self-contained file, no Runs section, no folder
    plain = report.write(tmp_path / "plain.html", trials)
    assert '<section id="runs">' not in plain.read_text() and not (tmp_path / "plain-runs").exists()


def test_export_to_a_folder_holds_valid_atif_pages_results_and_the_report(tmp_path: Path) -> None:
    preset_id, _ = preset_trial(tmp_path, "p1")
    command_id, _ = command_trial(tmp_path, "c1")
    out = tmp_path / "export"
    done = CliRunner().invoke(main, ["export", "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["runs"] == 2 and summary["skipped"] == [] and not summary["archive"]
    index = json.loads((out / "index.json").read_text())
    assert index["format"] == "opsbench-export/v1" and index["atif_schema_version"] == "ATIF-v1.7"
    by_id = {r["run_id"]: r for r in index["runs"]}
    assert by_id[preset_id]["model_calls"] == 4 and by_id[preset_id]["input_tokens"] == 12600
    assert by_id[preset_id]["cost_usd"] == pytest.approx(0.03483) and by_id[preset_id]["outcome"] == "correct"
    assert by_id[command_id]["model_calls"] is None and by_id[command_id]["outcome"] == "wrong"
    for entry in index["runs"]:
        doc = json.loads((out / entry["files"]["trajectory"]).read_text())
        assert atif.problems(doc) == [] and doc["session_id"] == entry["run_id"]
        assert '<a href="../../report.html">' in (out / entry["files"]["page"]).read_text()
        assert json.loads((out / entry["files"]["scores"]).read_text())["diagnosis"]["status"] == "scored"
    board = json.loads((out / "results.json").read_text())["leaderboard"]
    assert {r["agent"]: r["cost_usd"] for r in board}["gemini-cli (scripted-model) [replay]"] == pytest.approx(0.03483)
    assert f'href="runs/{preset_id}/page.html"' in (out / "report.html").read_text()


def test_export_of_named_runs_to_an_archive(tmp_path: Path) -> None:
    preset_id, _ = preset_trial(tmp_path, "p1")
    command_trial(tmp_path, "c1")
    out = tmp_path / "bundle.tar.gz"
    done = CliRunner().invoke(main, ["export", preset_id, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"exported 1 run(s) to {out}")
    with tarfile.open(out) as tar:
        names = tar.getnames()
        index = json.load(tar.extractfile("bundle/index.json"))  # type: ignore[arg-type]
    assert f"bundle/runs/{preset_id}/trajectory.atif.json" in names and "bundle/report.html" in names
    assert [r["run_id"] for r in index["runs"]] == [preset_id] and index["selection"] == {"run_ids": [preset_id]}


def test_export_of_a_campaign_takes_its_trials_and_skips_those_not_indexed(tmp_path: Path, home: Path) -> None:
    preset_id, _ = preset_trial(tmp_path, "p1")
    command_trial(tmp_path, "c1")  # not in the campaign
    folder = home / "campaigns" / "nightly"
    folder.mkdir(parents=True)
    (folder / "trials.jsonl").write_text(json.dumps({"run_id": preset_id}) + "\n" + json.dumps({"run_id": "gone"})
                                         + "\n")
    out = tmp_path / "camp"
    done = CliRunner().invoke(main, ["export", "--campaign", "nightly", "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["runs"] == 1 and summary["skipped"] == [
        {"run_id": "gone", "reason": "not in the run index (see `opsbench runs`)"}]
    assert (out / "campaign-trials.jsonl").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["no-such-run"], "run no-such-run: not in the run index"),
    (["--campaign", "nope"], "--campaign nope: no such campaign in"),
    (["--scenario", "nothing-like-this"], "nothing to export: the selection holds no agent run"),
    (["p1", "--campaign", "x"], "give run ids or --campaign, not both"),
])
def test_export_errors_name_the_problem_and_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    preset_trial(tmp_path, "p1")
    out = tmp_path / "never"
    done = CliRunner().invoke(main, ["export", *args, "--out", str(out), "--json"])
    assert done.exit_code == 2, done.output
    assert message in json.loads(done.output)["error"] and not out.exists()


def test_export_refuses_to_overwrite(tmp_path: Path) -> None:
    preset_trial(tmp_path, "p1")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    done = CliRunner().invoke(main, ["export", "--out", str(busy)])
    assert done.exit_code == 2 and "exists and is not an empty folder" in done.output
    archive = tmp_path / "old.tgz"
    archive.write_text("mine")
    done = CliRunner().invoke(main, ["export", "--out", str(archive)])
    assert done.exit_code == 2 and "the archive exists already" in done.output
    assert (busy / "keep.txt").read_text() == "mine" and archive.read_text() == "mine"


def test_a_run_whose_directory_is_gone_is_skipped_with_its_reason(tmp_path: Path) -> None:
    preset_id, _ = preset_trial(tmp_path, "p1")
    _, gone = command_trial(tmp_path, "c1")
    (gone / "run.json").unlink()
    out = tmp_path / "export"
    done = CliRunner().invoke(main, ["export", "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["runs"] == 1 and summary["skipped"][0]["run_id"] == "c1"
    assert "is gone (no run.json)" in summary["skipped"][0]["reason"]
    assert [r["run_id"] for r in json.loads((out / "index.json").read_text())["runs"]] == [preset_id]
