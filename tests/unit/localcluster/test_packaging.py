"""What an installed (not editable) leaderworkerset-localcluster reads at run time is in
its package: the webhook configurations are a copy of the shipped ones, kept equal."""

from __future__ import annotations

import tomllib
from pathlib import Path

from lws_localcluster import deploy

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "localcluster" / "src" / "lws_localcluster"


def test_the_packaged_webhook_manifests_are_the_shipped_ones() -> None:
    shipped = (REPO / deploy.WEBHOOK_MANIFESTS).read_text()
    packaged = (PACKAGE / deploy.PACKAGED_WEBHOOK_MANIFESTS).read_text()
    assert packaged == shipped, (
        f"cp {deploy.WEBHOOK_MANIFESTS} "
        f"localcluster/src/lws_localcluster/{deploy.PACKAGED_WEBHOOK_MANIFESTS}"
    )


def test_every_file_in_the_package_that_is_not_python_is_package_data() -> None:
    config = tomllib.loads((REPO / "localcluster" / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["package-data"]["lws_localcluster"])
    data = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    }
    assert data <= listed


def test_webhook_configurations_call_this_machine() -> None:
    configs = deploy.webhook_configurations(8443)
    assert {c["kind"] for c in configs} == {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for config in configs:
        for webhook in config["webhooks"]:
            assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:8443/")
