"""Finding the cluster the way kubectl does: --kubeconfig, else every file listed in
$KUBECONFIG merged (the first file to name a cluster, context or user, or to set
the current context, wins), else ~/.kube/config, else the pod's service account;
--context picks a context; the namespace is -n, else the context's, else
"default"."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from leaderworkerset.runtime.client import ApiClient

DEFAULT_KUBECONFIG = Path("~/.kube/config")
USER_AGENT = "kubectl-lws"
# Fields holding file paths, which a kubeconfig resolves against its own folder.
_PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
_SECTIONS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))


class ConfigError(Exception):
    """No usable kubeconfig; the message says what is missing."""


@dataclass(frozen=True)
class Target:
    config: SingleConfig
    namespace: str

    def client(self) -> ApiClient:
        # A person waits on the answer: fewer, not faster, requests matter.
        return ApiClient.from_config(self.config, qps=50, burst=100, user_agent=USER_AGENT)


def _absolute_paths(doc: dict[str, Any], folder: Path) -> None:
    for plural, singular in _SECTIONS:
        for entry in doc.get(plural) or []:
            body = entry.get(singular) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key in _PATH_FIELDS.get(singular, ()):
                value = body.get(key)
                if isinstance(value, str) and value and not Path(value).is_absolute():
                    body[key] = str(folder / value)


def merge_kubeconfigs(files: list[Path]) -> dict[str, Any]:
    """kubectl's merge of a $KUBECONFIG list: missing files are skipped, and the
    first file to define a named entry or the current context wins."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    seen: dict[str, set[str]] = {plural: set() for plural, _ in _SECTIONS}
    for path in files:
        path = path.expanduser()
        if not path.is_file():
            continue
        doc = yaml.safe_load(path.read_text()) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: not a kubeconfig")
        _absolute_paths(doc, path.parent.resolve())
        if doc.get("current-context") and "current-context" not in merged:
            merged["current-context"] = doc["current-context"]
        for plural, _ in _SECTIONS:
            for entry in doc.get(plural) or []:
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str) and name not in seen[plural]:
                    seen[plural].add(name)
                    merged[plural].append(entry)
    return merged


def load_kubeconfig(kubeconfig: str | None) -> KubeConfig:
    if kubeconfig:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise ConfigError(f"kubeconfig {kubeconfig} not found")
        files = [path]
    elif os.environ.get("KUBECONFIG"):
        files = [Path(p) for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    elif DEFAULT_KUBECONFIG.expanduser().is_file():
        files = [DEFAULT_KUBECONFIG]
    else:
        try:
            return KubeConfig.from_service_account()
        except LightkubeConfigError as exc:
            raise ConfigError(
                "no kubeconfig: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config"
            ) from exc
    merged = merge_kubeconfigs(files)
    if not merged["clusters"] and not merged["contexts"]:
        raise ConfigError(f"no cluster in {os.pathsep.join(str(f) for f in files)}")
    return KubeConfig.from_dict(merged, fname=files[0].expanduser())


def target(kubeconfig: str | None, context: str | None, namespace: str | None) -> Target:
    config = load_kubeconfig(kubeconfig)
    try:
        single = config.get(context_name=context)
    except (LightkubeConfigError, KeyError) as exc:
        raise ConfigError(str(exc)) from exc
    if single is None:
        raise ConfigError("kubeconfig has no current context; pass --context")
    return Target(single, namespace or single.namespace)
