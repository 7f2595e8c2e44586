"""What the command modules share: JSON output, the date option type, progress on stderr, and the one path every
error takes out of a command (`GuardedGroup`).

Errors, for every command alike: bad input (an `OpsBenchError`, or a usage error click finds) exits 2 with one
message naming the file, field or option, the problem and what to do; never a traceback. Plain output prints
``error: <message>`` on stderr. With ``--json`` the error is one JSON object on stdout, where the command's JSON goes:
``{"error": <message>, "problems": [{"file", "path", "message"}, ...]}`` (problems empty when there is one message).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from orchestrator.errors import OpsBenchError

if TYPE_CHECKING:
    from orchestrator.progress import Progress

DATE = click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"])


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


BAD_INPUT = 2
"""The exit status of bad input, for every command (click's own usage errors exit 2 too)."""
_JSON = "opsbench.json"


def fail(message: str, problems: list[dict[str, str]] | None = None, *, as_json: bool = False,
         status: int = BAD_INPUT) -> NoReturn:
    """Print one error (as JSON on stdout with --json, else ``error: ...`` on stderr) and exit with `status`."""
    if as_json:
        emit_json({"error": message, "problems": problems or []})
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(status)


def _problems(exc: BaseException) -> list[dict[str, str]]:
    return [dict(p.__dict__) for p in getattr(exc, "problems", [])]


class GuardedGroup(click.Group):
    """A group whose commands end every error the same way (see the module docstring): an OpsBenchError, a usage
    error under --json, and, as a last resort for a reader that let one through (without the file's name, which
    the shared readers give), input nested too deeply or not UTF-8."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_JSON] = "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        as_json = bool(ctx.meta.get(_JSON))
        try:
            return super().invoke(ctx)
        except OpsBenchError as exc:
            fail(str(exc), _problems(exc), as_json=as_json)
        except click.ClickException as exc:
            if not as_json:
                raise
            fail(exc.format_message(), as_json=True, status=exc.exit_code)
        except RecursionError:
            fail("an input is nested too deeply to read (thousands of levels): not a file OpsBench wrote or expects",
                 as_json=as_json)
        except UnicodeDecodeError as exc:
            fail(f"a file read is not UTF-8 text (byte {exc.start}): save it as UTF-8", as_json=as_json)


def writable(out: Path, option: str) -> Path:
    """`out` with its missing folders made (as `report --out` and every `--csv` do alike); a path that cannot be
    written is a usage error naming the option and the path, never a traceback."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"cannot create the folder {out.parent}: {exc.strerror}", param_hint=option) from exc
    if out.is_dir():
        raise click.BadParameter(f"{out} is a folder; give a file name", param_hint=option)
    return out


def written(option: str, out: Path, write: Callable[[Path], Any]) -> Any:
    """`write(out)` after `writable(out, option)`; an OSError while writing is the same usage error (exit 2)."""
    try:
        return write(writable(out, option))
    except OSError as exc:
        raise click.BadParameter(f"cannot write {out}: {exc.strerror}", param_hint=option) from exc


def progress(quiet: bool) -> Progress:
    """Step progress on the terminal (stderr), or none with --quiet."""
    from orchestrator.progress import Progress, TerminalProgress

    return Progress() if quiet else TerminalProgress().as_progress()


def echo_err(quiet: bool) -> Callable[[str], None]:
    """A function printing a line to stderr, or doing nothing with --quiet."""
    def echo(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    return echo


def _set_agent_network(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    import os

    if value:  # read by orchestrator/sandbox/ wherever a command agent starts, campaign workers included
        os.environ["OPSBENCH_AGENT_NETWORK"] = value


agent_network_option = click.option(
    "--agent-network", type=click.Choice(["egress", "gateway", "host"]), default=None, expose_value=False,
    callback=_set_agent_network, is_eager=True,
    help="A command agent's network: egress (default: its gateway and non-host addresses), gateway (its gateway "
         "only) or host (no namespace of its own); OPSBENCH_AGENT_ALLOW=host:port,... adds an LLM server. Same as "
         "OPSBENCH_AGENT_NETWORK.")
