"""Writing drawn instances safely (`opsbench generate`, `corpus build`): staged, validated as `opsbench validate` would,
then moved into place. Above both `generation` (the drawing) and `validate` (which checks templates), so neither
imports the other back."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError, SpecInvalid


def excluded_incidents(folders: Sequence[Path]) -> frozenset[str]:
    """The incidents (`instances.incident_key`: environment, faults with their arguments, tasks, timing) of the
    generated instances in `folders`: each a folder `opsbench generate` wrote (`<id>/scenario.yaml`) or a built corpus
    (`scenarios/<id>/scenario.yaml`). A folder with none is an error: an exclusion that excludes nothing is a wrong
    path, not a choice."""
    from orchestrator.generation.instances import incident_key
    from orchestrator.yamlfile import read_yaml

    incidents: set[str] = set()
    for folder in folders:
        specs = sorted(folder.glob("*/scenario.yaml")) or sorted(folder.glob("scenarios/*/scenario.yaml"))
        if not specs:
            raise OpsBenchError(f"--exclude {folder}: no generated instance there (<id>/scenario.yaml or "
                                "scenarios/<id>/scenario.yaml): give the public split's folder, e.g. what "
                                "`opsbench generate --all-templates --seed opsbench-dev-1 --count 270 --out DIR` "
                                "writes")
        for spec in specs:
            data = read_yaml(spec)
            if not isinstance(data, dict) or not isinstance(data.get("environment"), dict) or not isinstance(
                    data.get("faults"), list) or not isinstance(data.get("tasks"), list):
                raise OpsBenchError(f"--exclude {spec}: not a scenario spec (no environment, faults or tasks)")
            incidents.add(incident_key(data))
    return frozenset(incidents)


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
