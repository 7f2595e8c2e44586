"""Writing drawn instances safely (`opsbench generate`, `corpus build`): staged, validated as `opsbench validate` would,
then moved into place. Above both `generation` (the drawing) and `validate` (which checks templates), so neither
imports the other back."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError, SpecInvalid

DIGEST = re.compile(r"^[0-9a-f]{64}$")


def excluded_incidents(paths: Sequence[Path]) -> frozenset[str]:
    """The incidents (`instances.incident_digest` of environment, faults with their arguments, tasks, timing) of
    each path: a folder `opsbench generate` wrote (`<id>/scenario.yaml`), a built corpus
    (`scenarios/<id>/scenario.yaml`), or a file of digests, one per line, `#` starting a comment (what
    `opsbench corpus incidents` prints: a published split kept apart from later ones after its templates changed).
    A path with none is an error: an exclusion that excludes nothing is a wrong path, not a choice."""
    from orchestrator.generation.instances import incident_digest
    from orchestrator.yamlfile import read_yaml

    incidents: set[str] = set()
    for path in paths:
        if path.is_file():
            incidents |= _digests(path)
            continue
        specs = sorted(path.glob("*/scenario.yaml")) or sorted(path.glob("scenarios/*/scenario.yaml"))
        if not specs:
            raise OpsBenchError(f"--exclude {path}: no generated instance there (<id>/scenario.yaml or "
                                "scenarios/<id>/scenario.yaml): give the public split's folder, e.g. what "
                                "`opsbench generate --all-templates --seed opsbench-dev-1 --count 270 --out DIR` "
                                "writes, or a file of its digests (`opsbench corpus incidents DIR`)")
        for spec in specs:
            data = read_yaml(spec)
            if not isinstance(data, dict) or not isinstance(data.get("environment"), dict) or not isinstance(
                    data.get("faults"), list) or not isinstance(data.get("tasks"), list):
                raise OpsBenchError(f"--exclude {spec}: not a scenario spec (no environment, faults or tasks)")
            incidents.add(incident_digest(data))
    return frozenset(incidents)


def _digests(path: Path) -> set[str]:
    """The digests of a file `opsbench corpus incidents` wrote; a line that is not one is an error naming it."""
    out: set[str] = set()
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not DIGEST.match(line):
            raise OpsBenchError(f"--exclude {path}:{n}: {line[:40]!r} is not an incident digest (64 lowercase hex "
                                "digits, as `opsbench corpus incidents` prints)")
        out.add(line)
    if not out:
        raise OpsBenchError(f"--exclude {path}: no incident digest in the file")
    return out


def generate_into(template_names: tuple[str, ...], seed: str, count: int, out: Path,
                  exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Draw, write into a staging folder, validate every instance as `opsbench validate` does, then move them into
    `out`; nothing is written to `out` when a template or an instance is bad. `exclude`: incidents no instance may
    be (another split's: `excluded_incidents`)."""
    from orchestrator.catalog import find_scenario
    from orchestrator.generation.instances import generate, write
    from orchestrator.generation.templates import load_template
    from orchestrator.validate import checked_scenario

    templates = [load_template(find_scenario(name)) for name in template_names]
    if len({t.scenario.id for t in templates}) != len(templates):
        raise OpsBenchError("a template is given twice")
    generated = generate(templates, seed, count, exclude)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".generating-", dir=out) as tmp:
        files = write(generated, Path(tmp))
        problems = [p for f in files for p in checked_scenario(f)[1]]
        if problems:
            raise SpecInvalid(problems)
        for inst in generated.instances:
            target = out / inst.id
            if target.exists():
                shutil.rmtree(target)
            (Path(tmp) / inst.id).rename(target)
    return {"out": str(out), "requested": count, "count": len(generated.instances),
            "instances": [{"id": i.id, "template": i.template, "level": i.spec["metadata"]["complexity"]["level"],
                           "draw": i.variation.key()} for i in generated.instances],
            "dropped": generated.dropped,
            "variation_space": {t.scenario.id: len(t.variations) for t in templates}}
