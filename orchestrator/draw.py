"""Writing drawn instances safely (`opsbench generate`, `corpus build`): staged, validated as `opsbench validate` would,
then moved into place. Above both `generation` (the drawing) and `validate` (which checks templates), so neither
imports the other back."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError, SpecInvalid


def generate_into(template_names: tuple[str, ...], seed: str, count: int, out: Path) -> dict[str, Any]:
    """Draw, write into a staging folder, validate every instance as `opsbench validate` does, then move them into
    `out`; nothing is written to `out` when a template or an instance is bad."""
    from orchestrator.catalog import find_scenario
    from orchestrator.generation.instances import generate, write
    from orchestrator.generation.templates import load_template
    from orchestrator.validate import checked_scenario

    templates = [load_template(find_scenario(name)) for name in template_names]
    if len({t.scenario.id for t in templates}) != len(templates):
        raise OpsBenchError("a template is given twice")
    generated = generate(templates, seed, count)
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
