"""Kyverno built here (roles/ciso_k8s_kyverno, `make kyverno`) without a cluster: the bundled manifest names exactly
the images the role builds, with imagePullPolicy Never, and files/mkmanifest.py makes such a manifest. Fast (< 2 s)."""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml

from orchestrator import paths

ROLE = paths.PROJECT_ROOT / "roles" / "ciso_k8s_kyverno"
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
VERSION = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["ciso_k8s_kyverno_version"]
PREFIX = VARS["ciso_k8s_kyverno__image_prefix"]
IMAGES = {f"{PREFIX}{c['name']}:{VERSION}" for c in VARS["ciso_k8s_kyverno__components"]}


def _mkmanifest():
    spec = importlib.util.spec_from_file_location("mkmanifest", ROLE / "files" / "mkmanifest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_pins_the_version_and_kyvernos_replace():
    gomod = (ROLE / "files" / "module" / "go.mod").read_text()
    assert re.search(rf"^\s*github\.com/kyverno/kyverno {re.escape(VERSION)}\b", gomod, re.M)
    assert "replace k8s.io/pod-security-admission => github.com/kyverno/pod-security-admission" in gomod
    for component in VARS["ciso_k8s_kyverno__components"]:
        assert f"github.com/kyverno/kyverno/cmd/{component['binary']}\n" in gomod
        containerfile = (ROLE / "files" / "images" / f"Containerfile.{component['name']}").read_text()
        assert f"COPY {component['binary']} /{component['binary']}\n" in containerfile


def test_bundled_manifest_names_the_built_images_only():
    text = (ROLE / "files" / f"install-{VERSION}.yaml").read_text()
    assert text.startswith("# yamllint disable-file\n")
    refs = re.findall(r'^\s*image: "?([^"\s]+)"?$', text, re.M)
    assert set(refs) == IMAGES
    pulls = re.findall(r"^\s*imagePullPolicy: (\S+)$", text, re.M)
    assert pulls and set(pulls) == {"Never"}
    assert "app.kubernetes.io/version: latest" not in text


def test_mkmanifest_rewrites_images_pull_policy_and_version():
    source = "\n".join(f'      - name: c{i}\n        image: "{ref}"\n        imagePullPolicy: IfNotPresent'
                       for i, ref in enumerate(_mkmanifest().IMAGES)) + "\n    app.kubernetes.io/version: latest\n"
    out = _mkmanifest().rewrite(source, "v9.9.9")
    assert out.startswith("# yamllint disable-file\n")
    assert set(re.findall(r'image: "([^"]+)"', out)) == {ref.replace(VERSION, "v9.9.9") for ref in IMAGES}
    assert "IfNotPresent" not in out and out.count("imagePullPolicy: Never") == 5
    assert "app.kubernetes.io/version: v9.9.9" in out


def test_mkmanifest_refuses_a_manifest_without_the_five_images():
    with pytest.raises(ValueError, match="expected 5 images"):
        _mkmanifest().rewrite('        image: "reg.kyverno.io/kyverno/kyverno:latest"\n', "v1.19.1")
