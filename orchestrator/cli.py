"""The ``opsbench`` command line."""

from __future__ import annotations

import errno
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from orchestrator import __version__, store
from orchestrator.errors import OpsBenchError

EXIT_CODES = {"completed": 0, "invalid": 3, "error": 4, "timeout": 4, "interrupted": 130}


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


class OpsBenchGroup(click.Group):
    """Prints OpsBenchError as a one-paragraph message instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpsBenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=OpsBenchGroup)
@click.version_option(__version__, prog_name="opsbench")
def main() -> None:
    """OpsBench: benchmark AI agents on real IT-operations work."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Validate scenario specs (default: all under scenario_specs/)."""
    from orchestrator.spec import spec_files
    from orchestrator.validate import validate_paths

    roots = list(paths) or None
    problems = validate_paths(roots)
    count = len(spec_files(roots))
    if as_json:
        _emit_json({"specs": count, "problems": [p.__dict__ for p in problems]})
    else:
        for p in problems:
            click.echo(f"{p}", err=True)
        click.echo(f"{count} spec(s) checked, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_(as_json: bool) -> None:
    """List the scenarios."""
    from orchestrator.spec import load_scenario, spec_files

    rows = []
    for file in spec_files():
        meta = load_scenario(file).data.get("metadata", {})
        rows.append({"id": meta.get("id"), "domain": meta.get("domain"), "class": meta.get("class"),
                     "complexity": meta.get("complexity", {}).get("level"), "name": meta.get("name")})
    if as_json:
        _emit_json(rows)
        return
    click.echo(f"{'ID':<36} {'DOMAIN':<7} {'LEVEL':<7} {'CLASS':<22} NAME")
    for r in rows:
        click.echo(f"{r['id']:<36} {r['domain']:<7} {r['complexity']:<7} {r['class']:<22} {r['name']}")


@main.command()
@click.argument("scenario")
@click.option("--agent", help="Agent command, run with OPSBENCH_MANIFEST set (default: the heuristic baseline agent).")
@click.option("--keep", is_flag=True, help="Leave the environment deployed after the run.")
@click.option("--tool-profile", default="full", show_default=True,
              type=click.Choice(["full", "no-traces", "metrics-only", "observe-only"]),
              help="Which tools the gateway offers the agent (evidence ablations, as in CUJBench).")
@click.option("--remote-agent", "remote_port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve the HTTP agent API on PORT for a remote agent instead of running a command; the key is "
                   "OPSBENCH_AGENT_API_KEY (or the file in OPSBENCH_AGENT_API_KEY_FILE).")
@click.option("--backend", type=click.Choice(["local", "kubernetes"]), default=None,
              help="Expect the scenario's backend to be this one (kubernetes: the cluster of KUBECONFIG).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def run(scenario: str, agent: str | None, keep: bool, tool_profile: str, remote_port: int | None,
        backend: str | None, as_json: bool, quiet: bool) -> None:
    """Run SCENARIO (an id or a path) end to end: deploy, inject, agent, evaluate, clean up."""
    from orchestrator.lifecycle import Progress, Run
    from orchestrator.progress import TerminalProgress
    from orchestrator.spec import find_scenario

    scn = find_scenario(scenario)
    if backend is not None and backend != scn.backend:
        raise OpsBenchError(f"scenario {scn.id} runs on the {scn.backend} backend, not {backend} "
                            f"(environment.backend in {scn.path}); its kubernetes counterparts are listed by "
                            "`opsbench list` with ids k8s-*")
    progress = Progress() if quiet else TerminalProgress().as_progress()
    remote = None
    if remote_port is not None:
        if agent:
            raise OpsBenchError("give either --agent or --remote-agent, not both")
        remote = _agent_api(remote_port)
        agent = f"remote agent via {remote.url}"
    the_run = Run.create(scn, agent, keep=keep, progress=progress, tool_profile=tool_profile)
    the_run.remote = remote
    if not quiet:
        click.echo(f"run {the_run.id}: scenario {scn.id} (state in {the_run.run_dir})", err=True)
        if remote is not None:
            click.echo(f"agent API at {remote.url}: the manifest is served at /v1/manifest once the incident is "
                       "handed over", err=True)
    try:
        summary = the_run.execute()
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        _record_full_disk(the_run, exc)
    finally:
        if remote is not None:
            remote.close()
    if as_json:
        _emit_json(summary)
    else:
        _print_summary(summary)
    code = EXIT_CODES.get(summary["status"], 4)
    if code == 0 and summary["cleanup"] != "done":
        code = 5
    sys.exit(code)


@main.command()
@click.option("--ground-truth", "gt_path", required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The scenario's ground_truth.yaml.")
@click.option("--output", "output_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The agent's output JSON (a missing file scores as no_submission).")
@click.option("--topology", "topo_path", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="topology.yml or a run's environment.json (default: the scenario's environment's topology).")
@click.option("--trajectory", "traj_path", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="The run's trajectory.jsonl: adds the process metrics under 'process'.")
@click.option("--judge", is_flag=True,
              help="Also ask the LLM judge configured by OPSBENCH_JUDGE_URL/_MODEL (never the only score).")
@click.option("--json", "as_json", is_flag=True, help="Print every metric as JSON.")
def score(gt_path: Path, output_path: Path, topo_path: Path | None, traj_path: Path | None, judge: bool,
          as_json: bool) -> None:
    """Score one agent diagnosis offline against a ground truth (deterministic: same input, same score)."""
    import yaml

    from orchestrator.evaluation import score_diagnosis
    from orchestrator.spec import read_yaml
    from orchestrator.validate import load_topology, schema_problems

    truth = read_yaml(gt_path)
    problems = schema_problems(gt_path, truth, "ground_truth")
    if problems:
        raise OpsBenchError("invalid ground truth: " + "; ".join(map(str, problems)))
    topology: Any = None
    if topo_path is not None:
        loaded = yaml.safe_load(topo_path.read_text())
        topology = loaded.get("topology", loaded) if isinstance(loaded, dict) else None
    else:
        spec_file = gt_path.parent / "scenario.yaml"
        if spec_file.is_file():
            env = read_yaml(spec_file)["environment"]
            topology = load_topology(env["application"], env.get("backend", "local"))
    if not isinstance(topology, dict) or "entities" not in topology:
        raise OpsBenchError(f"no topology for {gt_path}: pass --topology (a topology.yml or a run's environment.json)")
    result = score_diagnosis(output_path, truth, topology)
    if traj_path is not None:
        from orchestrator.evaluation.process import score_process
        result["process"] = score_process(traj_path, output_path, truth)
    if judge:
        from orchestrator.evaluation import judge as llm_judge
        try:
            config = llm_judge.judge_config_from_env()
        except ValueError as exc:
            raise OpsBenchError(f"LLM judge misconfigured: {exc}") from exc
        if config is None:
            raise OpsBenchError("--judge needs OPSBENCH_JUDGE_URL and OPSBENCH_JUDGE_MODEL (see docs/llm-judge.md)")
        try:
            output = json.loads(output_path.read_text())
        except (OSError, ValueError):
            output = None
        result["judge"] = llm_judge.judge_diagnosis(output, truth, config)
    if as_json:
        _emit_json(result)
        return
    for key in sorted(result):
        if isinstance(result[key], dict):
            for sub in sorted(result[key]):
                click.echo(f"{key}.{sub}: {result[key][sub]}")
        else:
            click.echo(f"{key}: {result[key]}")


def _agent_api(port: int) -> Any:
    """Start the agent API for a remote agent with the operator's key (env var or key file)."""
    import os

    from orchestrator.agent_api import AgentAPI

    key = os.environ.get("OPSBENCH_AGENT_API_KEY", "")
    key_file = os.environ.get("OPSBENCH_AGENT_API_KEY_FILE")
    if not key and key_file:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as exc:
            raise OpsBenchError(f"cannot read OPSBENCH_AGENT_API_KEY_FILE {key_file}: {exc.strerror}") from exc
    if len(key) < 16:
        raise OpsBenchError("--remote-agent needs a key of 16+ characters in OPSBENCH_AGENT_API_KEY "
                            "(or OPSBENCH_AGENT_API_KEY_FILE); the remote agent sends it as a bearer token")
    try:
        api = AgentAPI(key, port=port)
    except OSError as exc:
        raise OpsBenchError(f"cannot serve the agent API on port {port}: {exc.strerror}") from exc
    return api.__enter__()


@main.command("verify-scenarios")
@click.argument("scenarios", nargs=-1)
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1, 100),
              help="Trials per scenario; all must pass.")
@click.option("--domain", default="SRE", show_default=True, help="With no SCENARIOS: every scenario of this domain.")
@click.option("--parallel", default=1, show_default=True, type=click.IntRange(1, 8),
              help="Environments at once (each deployed separately; scenarios are split among them).")
@click.option("--idempotency", is_flag=True,
              help="Also remove before injecting (must be a no-op) and inject twice (must equal once).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def verify_scenarios(scenarios: tuple[str, ...], repeats: int, domain: str, parallel: int, idempotency: bool,
                     as_json: bool, quiet: bool) -> None:
    """Prove scenarios manifest and recover: inject -> manifest -> remove -> recover, no agent.

    Scenarios on the same environment share one deployment. Prints per scenario: pass/fail over
    the repeats, time to alert and to recover (median and range, seconds) and leftovers."""
    from orchestrator.lifecycle import Progress
    from orchestrator.progress import TerminalProgress
    from orchestrator.spec import find_scenario, load_scenario, spec_files
    from orchestrator.verify import render_table, summarize, verify

    if scenarios:
        chosen = [find_scenario(s) for s in scenarios]
    else:
        chosen = [find_scenario(str(f)) for f in spec_files()
                  if load_scenario(f).data.get("metadata", {}).get("domain") == domain]
    if not chosen:
        raise OpsBenchError(f"no scenarios to verify (domain {domain}); see `opsbench list`")
    if not quiet:
        click.echo(f"verifying {len(chosen)} scenario(s) x {repeats} repeat(s), {parallel} environment(s) at once",
                   err=True)
    progress = Progress() if quiet else TerminalProgress().as_progress()

    def on_trial(t: Any) -> None:
        if not quiet:
            click.echo(f"  {t.scenario} #{t.repeat}: {t.outcome}"
                       + (f" alert {t.time_to_alert}s" if t.time_to_alert is not None else "")
                       + (f" recover {t.time_to_recover}s" if t.time_to_recover is not None else "")
                       + (f" ({t.reason})" if t.reason else ""), err=True)

    trials = verify(chosen, repeats, progress, on_trial, parallel, idempotency)
    rows = summarize(trials, [s.id for s in chosen], repeats)
    ok = all(r["passed"] for r in rows)
    if as_json:
        _emit_json({"ok": ok, "repeats": repeats, "scenarios": rows})
    else:
        click.echo(render_table(rows))
        click.echo(f"{sum(r['passed'] for r in rows)}/{len(rows)} scenario(s) passed {repeats} repeat(s)")
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("scenarios", nargs=-1)
@click.option("--file", "campaign_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="A campaign file (YAML: name, scenarios, agents, trials, parallel); options given here override.")
@click.option("--name", help="The campaign's name: its record is kept under the state dir, and running the same "
                             "name again resumes it (default: from the file, else 'default').")
@click.option("--agent", "agents", multiple=True,
              help="Agent command (repeat for several; default: each scenario's domain baseline).")
@click.option("--trials", type=click.IntRange(1, 100), help="Trials per scenario and agent.  [default: 1]")
@click.option("--parallel", type=click.IntRange(1, 8), help="Environments at once.  [default: 1]")
@click.option("--tool-profile", type=click.Choice(["full", "no-traces", "metrics-only", "observe-only"]),
              help="Which tools the gateway offers.  [default: full]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def campaign(scenarios: tuple[str, ...], campaign_file: Path | None, name: str | None, agents: tuple[str, ...],
             trials: int | None, parallel: int | None, tool_profile: str | None, as_json: bool, quiet: bool) -> None:
    """Run SCENARIOS x agents x trials on shared environments; resumable by name.

    Trials of scenarios on the same environment reuse one deployment (faults removed and the
    baseline re-checked between trials). Each trial is an ordinary run: `opsbench results` and
    `opsbench leaderboard` count it."""
    from orchestrator.campaign import Campaign, load_campaign_file, resolve, run_campaign, summarize
    from orchestrator.lifecycle import Progress
    from orchestrator.progress import TerminalProgress

    conf: dict[str, Any] = load_campaign_file(campaign_file) if campaign_file else {}
    ids = list(scenarios) or conf.get("scenarios") or []
    if not ids:
        raise OpsBenchError("no scenarios: give scenario ids or --file (see `opsbench list`)")
    chosen = resolve(ids)
    the_agents = list(agents) or conf.get("agents") or [""]  # "": each scenario's domain baseline
    n_trials = trials or conf.get("trials", 1)
    k = parallel or conf.get("parallel", 1)
    camp = Campaign(name or conf.get("name") or "default")
    progress = Progress() if quiet else TerminalProgress().as_progress()
    if not quiet:
        click.echo(f"campaign {camp.name}: {len(chosen)} scenario(s) x {len(the_agents)} agent(s) x {n_trials} "
                   f"trial(s), {k} environment(s) at once (record: {camp.file})", err=True)

    def on_record(r: Any) -> None:
        if not quiet:
            click.echo(f"  {r.scenario} #{r.trial}: {r.status}"
                       + ("" if r.passed is None else " pass" if r.passed else " fail")
                       + f" in {r.elapsed}s" + (f" ({r.reason[:200]})" if r.reason else ""), err=True)

    run_campaign(camp, chosen, the_agents, n_trials, k, progress, on_record,
                 tool_profile or conf.get("tool_profile", "full"))
    wanted = {(s.id, a, t) for s in chosen for a in the_agents for t in range(1, n_trials + 1)}
    latest = {r.key: r for r in camp.records() if (r.scenario, r.agent, r.trial) in wanted}
    rows = summarize(list(latest.values()))
    missing = len(wanted) - sum(1 for r in latest.values() if r.status in ("completed", "invalid"))
    if as_json:
        _emit_json({"campaign": camp.name, "record": str(camp.file), "unfinished": missing, "scenarios": rows})
    else:
        click.echo(f"{'SCENARIO':<44} {'TRIALS':>6} {'PASSED':>6} {'MEDIAN s':>8}  STATUSES")
        for r in rows:
            click.echo(f"{r['scenario']:<44} {r['trials']:>6} {r['passed']:>6} {r['median_s'] or '-':>8}  "
                       f"{','.join(r['statuses'])}")
        click.echo(f"{len(wanted) - missing}/{len(wanted)} trial(s) finished"
                   + (f"; run the same command again to resume the other {missing}" if missing else ""))
    sys.exit(0 if missing == 0 else 1)


@main.command()
@click.argument("scenarios", nargs=-1)
@click.option("--trials", default=2, show_default=True, type=click.IntRange(1, 50), help="Trials per scenario.")
@click.option("--parallel", "levels", default="1,2", show_default=True,
              help="Comma-separated environments-at-once levels to measure.")
@click.option("--overhead-repeats", default=5, show_default=True, type=click.IntRange(1, 50),
              help="Interleaved repeats of one step, orchestrator vs bare ansible-playbook.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def bench(scenarios: tuple[str, ...], trials: int, levels: str, overhead_repeats: int, as_json: bool,
          quiet: bool) -> None:
    """Measure the lifecycle with a no-op agent: per-phase times, runs/hour per level, peak memory, overhead.

    Default scenarios: loopweb-web-down and shop-cart-down. See docs/performance.md."""
    from orchestrator.bench_lifecycle import bench as run_bench
    from orchestrator.bench_lifecycle import render
    from orchestrator.lifecycle import Progress
    from orchestrator.progress import TerminalProgress
    from orchestrator.spec import find_scenario

    try:
        ks = sorted({int(k) for k in levels.split(",") if k.strip()})
    except ValueError:
        raise OpsBenchError(f"--parallel {levels!r}: comma-separated integers, e.g. 1,2") from None
    if not ks or any(not 1 <= k <= 8 for k in ks):
        raise OpsBenchError(f"--parallel {levels!r}: levels from 1 to 8")
    chosen = [find_scenario(s) for s in (scenarios or ("loopweb-web-down", "shop-cart-down"))]
    progress = Progress() if quiet else TerminalProgress().as_progress()
    echo = (lambda text: None) if quiet else (lambda text: click.echo(text, err=True))
    report = run_bench(chosen, trials, ks, overhead_repeats, progress, echo)
    if as_json:
        _emit_json(report)
    else:
        click.echo(render(report))


def _print_summary(s: dict[str, Any]) -> None:
    click.echo(f"run {s['run_id']}  scenario {s['scenario']}  status {s['status']}")
    if s["reason"]:
        click.echo(f"  reason: {s['reason']}")
    if s["agent"]:
        click.echo(f"  agent: {s['agent'].get('status')} in {s['agent'].get('elapsed')}s"
                   + (f" ({s['agent']['detail']})" if s["agent"].get("detail") else ""))
        isolation = str(s["agent"].get("isolation") or "")
        if isolation:  # the full lists are in --json; a run without a sandbox is worth a glance
            click.echo(f"  agent isolation: {isolation.split(';')[0]}")
    for name, scores in s["evaluations"].items():
        shown = {k: v for k, v in scores.items() if k not in ("predicted",)}
        click.echo(f"  {name}: {json.dumps(shown, sort_keys=True)}")
    click.echo(f"  cleanup: {s['cleanup']}" + (f", recovered: {s['recovered']}" if s["recovered"] is not None else ""))
    for p in s["cleanup_problems"]:
        click.echo(f"    ! {p}")
    for r in s.get("cleanup_retried", []):
        click.echo(f"    retried: {r}")


@main.command()
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--limit", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def runs(scenario: str | None, limit: int, as_json: bool) -> None:
    """List recorded runs, newest first."""
    rows = store.list_runs(limit=limit, scenario=scenario)
    if as_json:
        _emit_json(rows)
        return
    click.echo(f"{'RUN':<24} {'SCENARIO':<36} {'STATUS':<12} {'PURPOSE':<8} CREATED")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created"]))
        click.echo(f"{r['id']:<24} {r['scenario_id']:<36} {r['status']:<12} {r['purpose']:<8} {created}")


@main.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
def show(run_id: str, as_json: bool) -> None:
    """Show one run: its phase timeline and outcome."""
    run = store.get_run(run_id)
    if run is None:
        raise OpsBenchError(f"no run '{run_id}' (see `opsbench runs`)")
    run["outcome"] = json.loads(run["outcome"]) if run.get("outcome") else None
    if as_json:
        _emit_json(run)
        return
    click.echo(f"run {run['id']}  scenario {run['scenario_id']} v{run['spec_version']} "
               f"({run['spec_digest']})  status {run['status']}  purpose {run['purpose']}")
    t0 = run["created"]
    for p in run["phases"]:
        ended = f"{p['ended'] - p['started']:6.1f}s" if p["ended"] else "   ...  "
        click.echo(f"  +{p['started'] - t0:7.1f}s {p['phase']:<14} {ended} {p['status']}"
                   + (f"  {p['detail'][:150]}" if p["detail"] else ""))
    if run["outcome"]:
        _print_summary(run["outcome"])


_DATE = click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"])


@main.command()
@click.option("--agent", help="Only this agent (display name, name, model or exact command).")
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--since", type=_DATE, help="Only runs started at or after DATE (local time).")
@click.option("--json", "as_json", is_flag=True, help="Print per-scenario rows and breakdowns as JSON.")
@click.option("--csv", "csv_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the per-scenario rows to FILE as CSV.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
def results(agent: str | None, scenario: str | None, since: Any, as_json: bool, csv_file: Path | None,
            include_harness: bool) -> None:
    """Per (agent, scenario): trials n, correct c, failure kinds, pass@k for k <= n, NTAM, agent time, MTTD."""
    from orchestrator import results as res

    loaded = res.load(agent, scenario, since.timestamp() if since else None, include_harness)
    trials = loaded.trials
    rows = res.scenario_results(trials)
    if csv_file:
        res.write_csv(rows, csv_file)
    if as_json:
        _emit_json({"scenarios": rows, "breakdowns": res.breakdowns(trials),
                    "harness_runs_left_out": loaded.harness_left_out})
        return
    if not trials:
        click.echo("no runs recorded (see `opsbench run`)")
    else:
        click.echo(res.render_results(rows))
        for dimension in ("complexity", "traces"):
            click.echo("")
            click.echo(res.render_breakdown(res.breakdown(trials, dimension)))
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@main.command()
@click.option("--k", "k", default=1, show_default=True, type=click.IntRange(1, 1000),
              help="pass@k (over each agent's scenarios with at least k trials).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--csv", "csv_file", type=click.Path(path_type=Path, dir_okay=False), help="Also write the rows as CSV.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
def leaderboard(k: int, as_json: bool, csv_file: Path | None, include_harness: bool) -> None:
    """One row per agent (and model), ITBench Table 4 style, best pass@k first."""
    from orchestrator import results as res

    loaded = res.load(include_harness=include_harness)
    rows = res.leaderboard(loaded.trials, k)
    if csv_file:
        res.write_csv(rows, csv_file)
    if as_json:
        _emit_json({"agents": rows, "harness_runs_left_out": loaded.harness_left_out})
        return
    click.echo(res.render_leaderboard(rows, k) if rows else "no runs recorded (see `opsbench run`)")
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@main.command()
@click.option("--out", default="report.html", show_default=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--k", "k", default=1, show_default=True, type=click.IntRange(1, 1000))
@click.option("--agent", help="Only this agent.")
@click.option("--scenario", help="Only runs of this scenario.")
@click.option("--since", type=_DATE, help="Only runs started at or after DATE.")
@click.option("--include-harness", is_flag=True,
              help="Also count the harness's own runs (`opsbench bench`'s no-op agent), left out by default.")
def report(out: Path, k: int, agent: str | None, scenario: str | None, since: Any, include_harness: bool) -> None:
    """Write a self-contained static HTML report (inline SVG charts, no scripts, no network)."""
    from orchestrator import report as rep
    from orchestrator import results as res

    loaded = res.load(agent, scenario, since.timestamp() if since else None, include_harness)
    rep.write(out, loaded.trials, k, loaded.harness_left_out)
    click.echo(f"wrote {out} ({len(loaded.trials)} run(s))")
    if loaded.harness_left_out:
        click.echo(loaded.left_out_note())


@main.command()
@click.argument("run_ids", nargs=-1)
@click.option("--teardown", is_flag=True, help="Also tear down environments kept with `run --keep`.")
@click.option("--json", "as_json", is_flag=True)
def cleanup(run_ids: tuple[str, ...], teardown: bool, as_json: bool) -> None:
    """Finish removal and teardown of interrupted runs (default: every run whose process is gone)."""
    from orchestrator.lifecycle import Run
    from orchestrator.progress import TerminalProgress

    ids = list(run_ids) or [r["id"] for r in store.list_runs(limit=10_000) if _orphaned(r, teardown)]
    results = []
    for run_id in ids:
        the_run = Run.load(run_id, TerminalProgress().as_progress())
        if the_run.state["status"] == "running":
            if _alive(the_run.state.get("pid")):
                raise OpsBenchError(f"run {run_id} is still running (pid {the_run.state['pid']})")
            the_run.state["status"] = "interrupted"
            the_run.state["reason"] = "orchestrator died mid-run; finished by `opsbench cleanup`"
        elif "cleanup" not in the_run.state and not _alive(the_run.state.get("pid")):
            # Killed during its own clean-up: the forward outcome stands; record where clean-up was cut short.
            unfinished = [s for s in the_run.state["started"] if s not in the_run.state["done"]]
            the_run.state["cleanup_interrupted"] = unfinished[-1] if unfinished else "between steps"
        if teardown:
            the_run.state["keep"] = False
        pending = the_run.pending_cleanup()
        the_run.cleanup()
        results.append({"run_id": run_id, "steps": pending, "cleanup": the_run.state["cleanup"],
                        "problems": the_run.state["cleanup_problems"]})
    if as_json:
        _emit_json(results)
    else:
        for r in results:
            click.echo(f"{r['run_id']}: ran {', '.join(r['steps']) or 'nothing'}; cleanup {r['cleanup']}")
        if not results:
            click.echo("nothing to clean up")
    sys.exit(0 if all(r["cleanup"] == "done" for r in results) else 1)


def _record_full_disk(the_run: Any, exc: OSError) -> None:
    """The state dir filled up mid-run: record the run as errored with the cause (best effort: the disk is full)
    and stop with a message saying how to finish it. Never an agent failure."""
    reason = (f"the state dir is full ({exc.strerror}: {exc.filename or 'a state file'}); free space, then run "
              "`opsbench cleanup` to finish the run's clean-up")
    the_run.state["status"], the_run.state["reason"] = "error", reason
    try:
        store.update_run(the_run.id, status="error", outcome=json.dumps(the_run.summary()))
    except Exception as db_exc:  # the index may sit on the same full disk
        reason += f" (not recorded in the index either: {db_exc})"
    raise OpsBenchError(f"run {the_run.id} stopped: {reason}") from None


def _alive(pid: Any) -> bool:
    import os

    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _orphaned(row: dict[str, Any], teardown: bool = False) -> bool:
    """A run whose orchestrator is gone and that still owes clean-up steps."""
    from orchestrator.lifecycle import Run

    if row["status"] == "running" and _alive(row["pid"]):
        return False
    try:
        the_run = Run.load(row["id"])
        if teardown:
            the_run.state["keep"] = False
        return bool(the_run.pending_cleanup())
    except (OpsBenchError, OSError, ValueError):
        return False


@main.command()
@click.argument("run_id")
def topology(run_id: str) -> None:
    """Print a deployed run's topology (declared entities and edges + calls measured from traces) as JSON."""
    from orchestrator import paths
    from orchestrator.topology import run_topology

    run_dir = paths.runs_dir() / run_id
    if not (run_dir / "environment.json").is_file():
        raise OpsBenchError(f"run '{run_id}' has no deployed environment (is it kept with --keep, or still running?)")
    _emit_json(run_topology(run_dir))


@main.command()
@click.option("--check", is_flag=True, help="Fail if the generated docs are stale instead of writing them.")
def docs(check: bool) -> None:
    """Generate the reference docs and catalogs.

    docs/scenario-spec.md and docs/ground-truth.md from the JSON Schemas, docs/faults.md from
    every fault role's argument spec, docs/scenarios.md from every scenario spec and ground truth.
    """
    from orchestrator.docgen import write_docs

    stale = write_docs(check=check)
    if check and stale:
        click.echo(f"stale generated docs: {', '.join(stale)}; run `opsbench docs`", err=True)
        sys.exit(1)
    click.echo("generated docs are current" if check else "docs written")


@main.group()
def new() -> None:
    """Scaffold a fault role or a scenario that follows the conventions (docs/authoring.md)."""


def _print_scaffolded(done: Any) -> None:
    from orchestrator import paths

    for file in done.files:
        shown = file.relative_to(paths.PROJECT_ROOT) if file.is_relative_to(paths.PROJECT_ROOT) else file
        click.echo(f"  wrote {shown}")
    for note in done.notes:
        click.echo(f"note: {note}")
    click.echo("next:")
    for i, step in enumerate(done.next_steps, 1):
        click.echo(f"  {i}. {step}")


@new.command("fault")
@click.argument("name")
@click.option("--podman", is_flag=True,
              help="The fault acts on the run's podman containers: depend on podman_control and use its modules.")
def new_fault(name: str, podman: bool) -> None:
    """Scaffold roles/fault_NAME/ (NAME with or without the fault_ prefix) and its e2e test stub."""
    from orchestrator.scaffold import new_fault as scaffold_fault

    done = scaffold_fault(name, podman=podman)
    click.echo(f"scaffolded {done.files[0].parent.parent.name}:")
    _print_scaffolded(done)


@new.command("scenario")
@click.argument("scenario_id", metavar="ID")
@click.option("--fault", "faults", multiple=True, required=True, metavar="ROLE",
              help="Fault role to inject (repeat for several, in injection order).")
@click.option("--application", default="shop", show_default=True, help="Application (environment role env_<name>).")
@click.option("--baseline-from", metavar="ID",
              help="Copy the baseline checks from this scenario (default: the application's healthy control).")
@click.option("--propagation-length", type=int, default=1, show_default=True,
              help="Complexity input: hops from root cause to symptom.")
@click.option("--resolution-steps", type=int, help="Complexity input: steps to resolve  [default: number of faults]")
@click.option("--technology", "technologies", multiple=True, metavar="TECH",
              help="Complexity input (repeatable)  [default: the root-cause entity's technology]")
def new_scenario(scenario_id: str, faults: tuple[str, ...], application: str, baseline_from: str | None,
                 propagation_length: int, resolution_steps: int | None, technologies: tuple[str, ...]) -> None:
    """Scaffold scenario_specs/ID/ (spec + ground truth) and register ID in REGISTRY.yaml."""
    from orchestrator.scaffold import new_scenario as scaffold_scenario
    from orchestrator.validate import validate_paths

    done = scaffold_scenario(scenario_id, list(faults), application=application, baseline_from=baseline_from,
                             propagation_length=propagation_length, resolution_steps=resolution_steps,
                             technologies=list(technologies) or None)
    click.echo(f"scaffolded scenario {scenario_id}:")
    _print_scaffolded(done)
    problems = validate_paths([done.files[0].parent])
    for p in problems:
        click.echo(f"{p}", err=True)
    click.echo(f"opsbench validate: {len(problems)} problem(s) in the scaffold (it still holds TODO text)")



@main.group()
def awx() -> None:
    """AWX: export the job templates and workflows that run OpsBench's playbooks (docs/awx.md)."""


@awx.command("export")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=Path("awx/opsbench_awx.yml"),
              show_default=True, help="Where to write the playbook.")
@click.option("--scenario", "scenarios", multiple=True,
              help="Scenario id to export (repeatable; default: every kubernetes-backend scenario).")
@click.option("--cluster", "clusters", multiple=True, metavar="NAME=KUBECONFIG[:ID,ID...]",
              help="A cluster of the campaign, its kubeconfig (read when the playbook runs) and optionally its "
                   "share of the scenarios (repeatable; default: one cluster 'kind' with ~/.kube/config).")
@click.option("--trials", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Trials per scenario and cluster (ITBench's experiments file: trials x scenario list).")
@click.option("--agent", default=None, help="Agent command (default: each scenario's baseline agent).")
@click.option("--scm-url", default="https://github.com/example/opsbench.git", show_default=True,
              help="Git URL of the project AWX checks out.")
@click.option("--scm-branch", default="main", show_default=True)
def awx_export(output: Path, scenarios: tuple[str, ...], clusters: tuple[str, ...], trials: int, agent: str | None,
               scm_url: str, scm_branch: str) -> None:
    """Write a playbook (awx.awx collection) that creates the AWX objects and, with --tags all,launch, a campaign."""
    from orchestrator.awx import ClusterSpec, export_playbook
    from orchestrator.spec import find_scenario, load_scenario, spec_files

    if scenarios:
        scns = [find_scenario(s) for s in scenarios]
    else:
        scns = [s for s in map(load_scenario, spec_files()) if s.backend == "kubernetes"]
    specs = []
    for c in clusters or ("kind=~/.kube/config",):
        name, sep, rest = c.partition("=")
        if not sep or not name or not rest:
            raise OpsBenchError(f"--cluster {c}: expected NAME=KUBECONFIG[:ID,ID...]")
        kubeconfig, _, ids = rest.partition(":")
        specs.append(ClusterSpec(name, kubeconfig, [i for i in ids.split(",") if i]))
    try:
        text = export_playbook(scns, specs, trials=trials, agent=agent, scm_url=scm_url, scm_branch=scm_branch)
    except ValueError as exc:
        raise OpsBenchError(str(exc)) from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    click.echo(f"wrote {output}: {len(scns)} scenario(s), {len(specs)} cluster(s), {trials} trial(s) each")


if __name__ == "__main__":
    main()
