"""One image name and one version: the package, the chart's appVersion (the chart's
default tag) and the kustomize manager's image all say `leaderworkerset:<version>`."""

from __future__ import annotations

import re
import tomllib

import yaml

from leaderworkerset import __version__
from tests.toolkit.paths import REPO


def test_the_image_is_leaderworkerset_at_the_package_version() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == version
    chart = yaml.safe_load((REPO / "charts" / "lws" / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == version

    values = yaml.safe_load((REPO / "charts" / "lws" / "values.yaml").read_text())
    # An empty tag renders as the appVersion (charts/lws/templates/_helpers.tpl).
    assert values["image"]["manager"] == {
        "repository": "leaderworkerset",
        "tag": "",
        "pullPolicy": "IfNotPresent",
    }
    # The manager's image is named `controller`, as in upstream's config/manager, and
    # that kustomization's `images:` entry (what `kustomize edit set image controller=`
    # edits) makes it ours.
    docs = yaml.safe_load_all((REPO / "config" / "manager" / "manager.yaml").read_text())
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert images == ["controller"]
    kustomization = yaml.safe_load((REPO / "config" / "manager" / "kustomization.yaml").read_text())
    assert kustomization["images"] == [
        {"name": "controller", "newName": "leaderworkerset", "newTag": version}
    ]


def test_docs_build_and_install_the_same_image() -> None:
    texts = {
        path: path.read_text()
        for path in [REPO / "README.md", REPO / "Dockerfile", *sorted((REPO / "docs").glob("*.md"))]
    }
    built = {m for text in texts.values() for m in re.findall(r"docker build -t (\S+)", text)}
    assert built == {"<registry>/leaderworkerset:<tag>"}
    for path, text in texts.items():
        assert "leaderworkerset:latest" not in text, path
        assert "/lws:<tag>" not in text, path
