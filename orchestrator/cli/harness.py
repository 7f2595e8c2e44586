"""Commands that drive many runs: campaign, bench, verify-scenarios (library: `orchestrator.harness`)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.common import agent_network_option, echo_err, emit_json, progress
from orchestrator.errors import OpsBenchError


@click.command("verify-scenarios")
@agent_network_option
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
    from orchestrator.catalog import domain_scenarios, find_scenario
    from orchestrator.harness.verify import describe_trial, render_verdict, summarize, verify

    chosen = [find_scenario(s) for s in scenarios] if scenarios else domain_scenarios(domain)
    if not chosen:
        raise OpsBenchError(f"no scenarios to verify (domain {domain}); see `opsbench list`")
    echo = echo_err(quiet)
    echo(f"verifying {len(chosen)} scenario(s) x {repeats} repeat(s), {parallel} environment(s) at once")
    trials = verify(chosen, repeats, progress(quiet), lambda t: echo(describe_trial(t)), parallel, idempotency)
    rows = summarize(trials, [s.id for s in chosen], repeats)
    ok = all(r["passed"] for r in rows)
    if as_json:
        emit_json({"ok": ok, "repeats": repeats, "scenarios": rows})
    else:
        click.echo(render_verdict(rows, repeats))
    sys.exit(0 if ok else 1)


@click.command()
@agent_network_option
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
@click.option("--snapshots", "corpus", type=click.Path(path_type=Path),
              help="Replay every snapshot of this corpus directory (directories and archives) instead of running "
                   "SCENARIOS live: agents x snapshots x trials.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def campaign(scenarios: tuple[str, ...], campaign_file: Path | None, name: str | None, agents: tuple[str, ...],
             trials: int | None, parallel: int | None, tool_profile: str | None, corpus: Path | None, as_json: bool,
             quiet: bool) -> None:
    """Run SCENARIOS x agents x trials on shared environments; resumable by name.

    Trials of scenarios on the same environment reuse one deployment (faults removed and the
    baseline re-checked between trials). Each trial is an ordinary run: `opsbench results` and
    `opsbench leaderboard` count it. With --snapshots DIR the trials are replays of DIR's snapshots (mode
    replay, shown apart from live runs in results, leaderboard and report)."""
    if corpus is not None:
        _replay_campaign(scenarios, campaign_file, corpus, name, agents, trials, parallel, tool_profile, as_json,
                         quiet)
        return
    from orchestrator.agents.presets import resolve
    from orchestrator.harness.campaign import (
        Campaign,
        describe_record,
        outcome,
        render_outcome,
        request,
        run_campaign,
    )

    if campaign_file is not None:
        from orchestrator.yamlfile import read_yaml

        read_yaml(campaign_file)  # not UTF-8, malformed or nested thousands deep: one error naming the file
    req = request(scenarios, campaign_file, name, agents, trials, parallel, tool_profile)
    req = dataclasses.replace(req, agents=[resolve(a) or "" for a in req.agents])  # presets: checked now
    camp = Campaign(req.name)
    echo = echo_err(quiet)
    echo(f"campaign {camp.name}: {len(req.scenarios)} scenario(s) x {len(req.agents)} agent(s) x {req.trials} "
         f"trial(s), {req.parallel} environment(s) at once (record: {camp.file})")
    run_campaign(camp, req.scenarios, req.agents, req.trials, req.parallel, progress(quiet),
                 lambda r: echo(describe_record(r)), req.tool_profile)
    rows, wanted, missing = outcome(camp, req)
    if as_json:
        emit_json({"campaign": camp.name, "record": str(camp.file), "unfinished": missing, "scenarios": rows})
    else:
        click.echo(render_outcome(rows, wanted, missing))
    sys.exit(0 if missing == 0 else 1)


def _replay_campaign(scenarios: tuple[str, ...], campaign_file: Path | None, corpus: Path, name: str | None,
                     agents: tuple[str, ...], trials: int | None, parallel: int | None, tool_profile: str | None,
                     as_json: bool, quiet: bool) -> None:
    """`campaign --snapshots DIR` (library: `orchestrator.harness.campaign_replay`)."""
    from orchestrator.harness.campaign import Campaign, describe_record
    from orchestrator.harness.campaign_replay import render_replay_outcome, replay_outcome, run_replay_campaign

    if scenarios or campaign_file:
        raise OpsBenchError("--snapshots DIR replays the snapshots of DIR: give no SCENARIOS and no --file with it")
    camp = Campaign(name or "default")
    echo = echo_err(quiet)
    from orchestrator.agents.presets import resolve

    chosen = [resolve(a) or "" for a in agents] or [""]  # "": each scenario's baseline agent; presets resolved
    echo(f"campaign {camp.name}: snapshots of {corpus} x {len(chosen)} agent(s) x {trials or 1} trial(s), "
         f"{parallel or 1} frozen environment(s) at once (record: {camp.file})")
    ids, _ = run_replay_campaign(camp, corpus, chosen, trials or 1, parallel or 1, progress(quiet),
                                 lambda r: echo(describe_record(r)), tool_profile or "full")
    rows, wanted, missing = replay_outcome(camp, ids, chosen, trials or 1)
    if as_json:
        emit_json({"campaign": camp.name, "record": str(camp.file), "mode": "replay", "unfinished": missing,
                   "snapshots": rows})
    else:
        click.echo(render_replay_outcome(rows, wanted, missing))
    sys.exit(0 if missing == 0 else 1)


@click.command()
@agent_network_option
@click.argument("scenarios", nargs=-1)
@click.option("--trials", default=2, show_default=True, type=click.IntRange(1, 50), help="Trials per scenario.")
@click.option("--parallel", "levels", default="1,2", show_default=True,
              help="Comma-separated environments-at-once levels to measure.")
@click.option("--overhead-repeats", default=5, show_default=True, type=click.IntRange(1, 50),
              help="Interleaved repeats of one step, orchestrator vs bare ansible-playbook.")
@click.option("--agent-startup", "agent_startup", type=click.IntRange(1, 200), default=None, metavar="N",
              help="Only measure a command agent's start-up N times with and without containment (nothing is "
                   "deployed; see docs/agents.md).")
@click.option("--replay", "replay_mode", is_flag=True,
              help="Measure replay trials instead: the arguments are snapshots (directories, archives or corpus "
                   "directories; default: the committed sample corpus).")
@click.option("--cuj", "cuj_mode", is_flag=True,
              help="Measure browser evidence instead: one run of the shop's journeys (time, capture size), what "
                   "they add to a trial, the capture per scenario (SCENARIOS; default one per family); --trials "
                   "repeats. See docs/cuj.md.")
@click.option("--devops", "devops_mode", is_flag=True,
              help="Measure the DevOps tasks instead: a workspace's start (--trials times) and one trial with the "
                   "baseline agent of every DevOps scenario (or SCENARIOS: ids, scenario folders, or folders of "
                   "generated tasks): pass@1 and trial time per family, language and family x language. See "
                   "docs/devops.md.")
@click.option("--family", "families", multiple=True, metavar="CLASS",
              help="With --devops: only the scenarios of this class (repeatable; e.g. the families a scripted "
                   "baseline is meant for: build-config, monitoring, pipeline).")
@click.option("--per-cell", type=click.IntRange(1, 1000), default=None, metavar="N",
              help="With --devops: a stratified sample, at most N scenarios per class x language, drawn by --seed.")
@click.option("--seed", default="opsbench-bench-1", show_default=True,
              help="With --devops --per-cell: the sample's seed (the same seed and pool draw the same scenarios).")
@click.option("--generate", "generate_mode", is_flag=True,
              help="Measure generated incidents instead: drawing, then proving and recording --trials instances per "
                   "level with `corpus build` (SCENARIOS are templates; default four). See docs/generation.md.")
@click.option("--backend", type=click.Choice(["local", "kubernetes"]), default="local", show_default=True,
              help="kubernetes: measure the local cluster of `make cluster` instead (`make bench-k8s`): its build, "
                   "start, memory idle and with the shop, --trials trials of SCENARIOS on it beside the local "
                   "backend's (default k8s-shop-checkout-oom-killed and shop-cart-down, parallel 1, no-op agent), "
                   "its teardown. Refused while a cluster is up. See docs/performance.md.")
@click.option("--cold", is_flag=True,
              help="With --backend kubernetes: first a cold build (empty temporary Go caches) and a warm rebuild, "
                   "in temporary folders (GBs, removed after; tens of minutes).")
@click.option("--k8s-release", default=None, metavar="VERSION",
              help="With --backend kubernetes: the Kubernetes release to build and start (default: the role's).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (progress stays on stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.pass_context
def bench(ctx: click.Context, scenarios: tuple[str, ...], trials: int, levels: str, overhead_repeats: int,
          agent_startup: int | None, replay_mode: bool, cuj_mode: bool, devops_mode: bool, families: tuple[str, ...],
          per_cell: int | None, seed: str, generate_mode: bool, backend: str, cold: bool, k8s_release: str | None,
          as_json: bool, quiet: bool) -> None:
    """Measure the lifecycle with a no-op agent: per-phase times, runs/hour per level, peak memory, overhead.

    Default scenarios: loopweb-web-down and shop-cart-down. With --replay, SCENARIOS are snapshots and each level
    replays every snapshot --trials times (see docs/snapshots.md). With --backend kubernetes, the local cluster's
    costs beside the local backend's. See docs/performance.md."""
    if backend == "kubernetes":
        modes = (("--replay", replay_mode), ("--cuj", cuj_mode), ("--devops", devops_mode),
                 ("--generate", generate_mode), ("--agent-startup", agent_startup is not None),
                 ("--family", bool(families)), ("--per-cell", per_cell is not None))
        others = [flag for flag, given in modes if given]
        for name in ("levels", "overhead_repeats"):
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
                others.append("--" + name.replace("_", "-").replace("levels", "parallel"))
        if others:
            raise click.UsageError(f"--backend kubernetes measures at parallel 1 on its own: not with "
                                   f"{', '.join(others)}")
        _bench_kubernetes(scenarios, trials, cold, k8s_release, as_json, quiet)
        return
    if cold or k8s_release:
        raise click.UsageError("--cold and --k8s-release go with --backend kubernetes")
    if agent_startup is not None:
        from orchestrator.harness import bench_sandbox

        startup = bench_sandbox.bench(agent_startup, echo_err(quiet))
        if as_json:
            emit_json(startup)
        else:
            click.echo(bench_sandbox.render(startup))
        return
    if (families or per_cell is not None) and not devops_mode:
        raise click.UsageError("--family and --per-cell go with --devops")
    if devops_mode:
        from orchestrator.harness import bench_devops

        report_devops = bench_devops.bench_devops(trials, progress(quiet), scenarios, families, per_cell, seed)
        if as_json:
            emit_json(report_devops)
        else:
            click.echo(bench_devops.render(report_devops))
        return
    if cuj_mode:
        from orchestrator.harness import bench_cuj

        found = bench_cuj.bench_cuj(trials, progress(quiet), tuple(scenarios) or bench_cuj.PER_SCENARIO)
        if as_json:
            emit_json(found)
        else:
            click.echo(bench_cuj.render(found))
        return
    from orchestrator.harness.bench_lifecycle import DEFAULT_SCENARIOS, parse_levels, render

    ks = parse_levels(levels)
    report: dict[str, Any]
    if generate_mode:
        from orchestrator.harness import bench_generate

        report = bench_generate.bench_generate(scenarios, trials, ks, progress(quiet), echo_err(quiet))
        if as_json:
            emit_json(report)
        else:
            click.echo(bench_generate.render(report))
        return
    if replay_mode:
        from orchestrator.harness.bench_replay import bench_replay, replay_targets
        from orchestrator.harness.bench_replay import render as render_replay

        report = bench_replay(replay_targets(scenarios), trials, ks, progress(quiet), echo_err(quiet))
        if as_json:
            emit_json(report)
        else:
            click.echo(render_replay(report))
        sys.exit(0 if all(v["completed"] == v["trials"] for v in report["levels"].values()) else 1)
    from orchestrator.catalog import find_scenario
    from orchestrator.harness.bench_lifecycle import bench as run_bench

    chosen = [find_scenario(s) for s in (scenarios or DEFAULT_SCENARIOS)]
    report = run_bench(chosen, trials, ks, overhead_repeats, progress(quiet), echo_err(quiet))
    if as_json:
        emit_json(report)
    else:
        click.echo(render(report))


def _bench_kubernetes(scenarios: tuple[str, ...], trials: int, cold: bool, release: str | None, as_json: bool,
                      quiet: bool) -> None:
    """`bench --backend kubernetes` (library: `orchestrator.harness.bench_k8s`)."""
    from orchestrator.catalog import find_scenario
    from orchestrator.harness import bench_k8s

    k8s, local = bench_k8s.split_scenarios([find_scenario(s) for s in scenarios], find_scenario)
    report = bench_k8s.bench_k8s(k8s, local, trials, cold, release, progress(quiet), echo_err(quiet))
    if as_json:
        emit_json(report)
    else:
        click.echo(bench_k8s.render(report))
    sys.exit(0 if bench_k8s.complete(report) else 1)


COMMANDS = (verify_scenarios, campaign, bench)
