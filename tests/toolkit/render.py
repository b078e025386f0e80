"""The install manifests as the real tools render them, without a cluster: `helm
template` of a chart and `kubectl kustomize` of a folder, with the helm and kubectl that
hack/build-tools.sh builds (`make tools`), parsed into objects."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.toolkit.install_tools import helm_env, run_tool
from tests.toolkit.paths import REPO

Obj = dict[str, Any]
Key = tuple[str, str]

CHART = REPO / "charts" / "lws"
CONFIG = REPO / "config"
NAMESPACE = "lws-system"
# The committed chart names no image (it fails the install and says how to publish one):
# renders of it get this one first, which a test's own values can replace.
TEST_REPOSITORY = "registry.example/lws/lws"


def by_key(manifests: str) -> dict[Key, Obj]:
    """Objects by (kind, name); a render never holds two of one kind and name."""
    # libyaml's loader: the CRDs make a render tens of thousands of lines.
    docs = [d for d in yaml.load_all(manifests, Loader=yaml.CSafeLoader) if d]
    objs = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(objs) == len(docs), "two objects of one kind and name"
    return objs


@dataclass(frozen=True)
class Renderer:
    tools: Path  # holds helm and kubectl
    home: Path  # helm's caches, and scratch folders

    def image_values(self) -> Path:
        path = self.home / "test-image-values.yaml"
        if not path.is_file():
            path.write_text(yaml.safe_dump({"image": {"manager": {"repository": TEST_REPOSITORY}}}))
        return path

    def helm_template(
        self,
        values: Obj | None = None,
        *,
        chart: Path = CHART,
        release: str = "lws",
        namespace: str = NAMESPACE,
        values_files: tuple[Path, ...] = (),
        extra: tuple[str, ...] = (),
        image: bool = True,
    ) -> dict[Key, Obj]:
        return by_key(
            self.helm_template_text(values, chart, release, namespace, values_files, extra, image)
        )

    def helm_template_text(
        self,
        values: Obj | None = None,
        chart: Path = CHART,
        release: str = "lws",
        namespace: str = NAMESPACE,
        values_files: tuple[Path, ...] = (),
        extra: tuple[str, ...] = (),
        image: bool = True,
    ) -> str:
        args: list[str | Path] = ["template", release, chart, "--namespace", namespace]
        for path in (self.image_values(), *values_files) if image else values_files:
            args += ["--values", path]
        if values is not None:
            args += ["--values", "-"]
        args += list(extra)
        stdin = yaml.safe_dump(values) if values is not None else None
        return run_tool(self.tools, "helm", *args, env=helm_env(self.home), stdin=stdin)

    def helm_fails(
        self, values: Obj, *, chart: Path = CHART, kube_version: str = "", image: bool = True
    ) -> str:
        """`helm template`'s error output for values it must refuse."""
        cmd = [str(self.tools / "helm"), "template", "lws", str(chart)]
        cmd += ["--values", str(self.image_values())] if image else []
        cmd += ["--values", "-"]
        cmd += ["--kube-version", kube_version] if kube_version else []
        proc = subprocess.run(
            cmd,
            input=yaml.safe_dump(values),
            capture_output=True,
            text=True,
            env=helm_env(self.home),
            check=False,
            timeout=120,
        )
        assert proc.returncode != 0, f"helm rendered values it should refuse: {values}"
        return proc.stderr

    def helm(self, *args: str | Path) -> str:
        return run_tool(self.tools, "helm", *args, env=helm_env(self.home))

    def kustomize(self, folder: Path) -> dict[Key, Obj]:
        return by_key(self.kustomize_text(folder))

    def kustomize_text(self, folder: Path) -> str:
        return run_tool(self.tools, "kubectl", "kustomize", folder, env=helm_env(self.home))

    def config_copy(self, dest: Path) -> Path:
        """A copy of config/ to change, at ``dest``/config (where an overlay written
        for upstream's tree finds it by a relative path)."""
        target = dest / "config"
        shutil.copytree(CONFIG, target)
        return target
