"""One version, written once (src/leaderworkerset/_version.py): the package's metadata
takes it from there, and the chart's version and appVersion (the chart's default
tag), the kustomize manager's image tag and the CHANGELOG agree with it. The committed
chart names no image: a bare install fails and says how to publish one."""

from __future__ import annotations

import re
import tomllib

import yaml

from leaderworkerset import __version__
from leaderworkerset._version import __version__ as written
from tests.toolkit.paths import REPO
from tests.toolkit.render import Renderer


def test_the_version_is_written_once_and_everything_agrees() -> None:
    assert __version__ == written
    assert re.fullmatch(r"\d+\.\d+\.\d+", written), "a release version is semver (helm needs it)"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "leaderworkerset._version.__version__"
    }
    chart = yaml.safe_load((REPO / "charts" / "lws" / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == written
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(written)}\]", changelog, re.M), "no CHANGELOG entry"


def test_the_committed_chart_has_no_image_and_the_manifests_the_dev_one() -> None:
    values = yaml.safe_load((REPO / "charts" / "lws" / "values.yaml").read_text())
    # An empty tag renders as the appVersion (charts/lws/templates/_helpers.tpl); the
    # repository is what `make release` fills in.
    assert values["image"]["manager"] == {"repository": "", "tag": "", "pullPolicy": "IfNotPresent"}
    # The manager's image is named `controller`, as in upstream's config/manager, and
    # that kustomization's `images:` entry (what `kustomize edit set image controller=`
    # edits) makes it the one `make image` builds; the release's manifests.yaml sets
    # the released one over it.
    docs = yaml.safe_load_all((REPO / "config" / "manager" / "manager.yaml").read_text())
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert images == ["controller"]
    kustomization = yaml.safe_load((REPO / "config" / "manager" / "kustomization.yaml").read_text())
    assert kustomization["images"] == [
        {"name": "controller", "newName": "leaderworkerset", "newTag": written}
    ]


def test_a_bare_install_fails_and_says_how_to_publish_an_image(renderer: Renderer) -> None:
    error = renderer.helm_fails({}, image=False)
    assert "image.manager.repository is empty" in error
    for step in ("make release REGISTRY=<registry>", "skopeo copy --all", "helm push"):
        assert step in error, error
    assert f"lws-{written}.oci.tar" in error
    # The schema lets the empty string through to the template's message.
    assert "values don't meet the specifications of the schema" not in error


def test_a_repository_renders_with_the_app_version_as_tag(renderer: Renderer) -> None:
    objs = renderer.helm_template({"image": {"manager": {"repository": "r.example/lws/lws"}}})
    deployment = objs["Deployment", "lws-controller-manager"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"r.example/lws/lws:{written}"


def test_docs_build_and_install_the_same_image() -> None:
    texts = {path: path.read_text() for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    assert not (REPO / "Dockerfile").exists(), "the image is built by make image / make release"
    for path, text in texts.items():
        assert "docker build" not in text, path
        assert "leaderworkerset:latest" not in text, path
        # A release pushes `<registry>/lws:<version>`, upstream's name; not the old one.
        assert "<registry>/leaderworkerset" not in text, path
