#!/usr/bin/env python3
"""Make the bundled Kyverno manifest (files/install-<version>.yaml) from the Go module's own.

mkmanifest.py VERSION [SOURCE [DEST]]: SOURCE defaults to config/install-latest-testing.yaml of
github.com/kyverno/kyverno@VERSION in Go's module cache (`go mod download` of files/module puts it there: the
chart rendered with upstream's defaults, as the release's install.yaml), DEST to files/install-VERSION.yaml beside
this script. The five images become localhost/opsbench-kyverno-<component>:VERSION (built by the role's `build`
entry point) with imagePullPolicy Never, and the app.kubernetes.io/version labels `latest` become VERSION.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

IMAGES = {
    "reg.kyverno.io/kyverno/kyvernopre:latest": "init",
    "reg.kyverno.io/kyverno/kyverno:latest": "admission-controller",
    "reg.kyverno.io/kyverno/background-controller:latest": "background-controller",
    "reg.kyverno.io/kyverno/cleanup-controller:latest": "cleanup-controller",
    "reg.kyverno.io/kyverno/reports-controller:latest": "reports-controller",
}


def rewrite(text: str, version: str) -> str:
    """The manifest with OpsBench's images and version; fails unless exactly the five images are found."""
    lines = text.split("\n")
    out, n_img, n_pull = [], 0, 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("image: "):
            component = IMAGES[s[len("image: "):].strip('"')]
            line = line[: line.index("image:")] + f'image: "localhost/opsbench-kyverno-{component}:{version}"'
            n_img += 1
        elif s == "imagePullPolicy: IfNotPresent" and lines[i - 1].strip().startswith("image: "):
            line = line.replace("IfNotPresent", "Never")
            n_pull += 1
        elif s == "app.kubernetes.io/version: latest":
            line = line.replace("latest", version)
        out.append(line)
    if (n_img, n_pull) != (len(IMAGES), len(IMAGES)):
        raise ValueError(f"expected {len(IMAGES)} images with a pull policy, found {n_img} images, {n_pull} policies")
    header = [
        "# yamllint disable-file",
        f"# Kyverno {version}'s install manifest for OpsBench's offline cluster:"
        " config/install-latest-testing.yaml from the",
        f"# Go module github.com/kyverno/kyverno@{version} (helm template of charts/kyverno,"
        " as upstream's release install.yaml),",
        f"# with the images replaced by localhost/opsbench-kyverno-<component>:{version} (built from the module by",
        "# roles/ciso_k8s_kyverno/files/module), imagePullPolicy Never, and app.kubernetes.io/version latest -> "
        + version + ".",
    ]
    return "\n".join(header + out)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    version = argv[0]
    if len(argv) > 1:
        source = Path(argv[1])
    else:
        go_env = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True)
        modcache = go_env.stdout.strip()
        source = Path(modcache) / f"github.com/kyverno/kyverno@{version}/config/install-latest-testing.yaml"
    dest = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parent / f"install-{version}.yaml"
    dest.write_text(rewrite(source.read_text(), version))
    print(f"{source} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
