"""The kustomize install on the real node, as the operations guide gives it:
`kubectl apply --server-side -k config/default`, with the image config/manager names
(the one `make image` builds), through an overlay of the user's own that lowers the
Deployment's requests below their default (250m and 192Mi per replica, two replicas):
the node's two cores run the workloads too. Then `kubectl delete -k` removes it all.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from leaderworkerset.api.resources import (
    DEPLOYMENTS,
    LEADERWORKERSETS,
    MUTATING_WEBHOOKS,
    SECRETS,
    VALIDATING_WEBHOOKS,
)
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import NAMESPACE, RealCluster
from tests.toolkit.cluster import wait_ready
from tests.toolkit.installs import (
    CRDS,
    Steps,
    controller_pods_ready,
    create_once_admitted,
    no_lws_pods_left,
    normalized,
    remove_any_controller,
)
from tests.toolkit.paths import REPO
from tests.toolkit.rendezvous import groups_met, rendezvous_lws
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

DEPLOYMENT = "lws-controller-manager"
SECRET = "lws-webhook-server-cert"
WEBHOOK_CONFIGS = {
    MUTATING_WEBHOOKS: "lws-mutating-webhook-configuration",
    VALIDATING_WEBHOOKS: "lws-validating-webhook-configuration",
}
# What a user's overlay would set on a small node; the replicas stay two.
REQUESTS = {"cpu": "100m", "memory": "128Mi"}


def overlay(folder: Path) -> Path:
    """A user's overlay of config/default (kustomize loads a base from any folder,
    given relative to the overlay) lowering the manager's requests."""
    folder.mkdir(parents=True)
    patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/resources/requests",
            "value": REQUESTS,
        }
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "config" / "default", folder)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": DEPLOYMENT},
                "patch": yaml.safe_dump(patch),
            }
        ],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return folder


@pytest.fixture(scope="module")
async def cluster_api(real_cluster: RealCluster) -> AsyncIterator[ApiClient]:
    api = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        print(f"removed: {remove_any_controller(real_cluster.tools) or 'nothing'}")
        await no_lws_pods_left(api)
        yield api
        remove_any_controller(real_cluster.tools)
    finally:
        await api.close()


async def ca_injected(api: ApiClient) -> bytes | None:
    """The CA of the Secret the pods wrote, once every webhook of both configurations
    carries it."""
    secret = await api.get_or_none(SECRETS, SECRET, NAMESPACE)
    ca = base64.b64decode(((secret or {}).get("data") or {}).get("ca.crt", ""))
    if not ca:
        return None
    for resource, name in WEBHOOK_CONFIGS.items():
        config = await api.get(resource, name)
        webhooks = config["webhooks"]
        bundles = {base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in webhooks}
        if bundles != {ca}:
            return None
    return ca


async def test_kustomize_install_runs_groups_and_deletes_cleanly(
    cluster_api: ApiClient, real_cluster: RealCluster, tmp_path: Path
) -> None:
    steps = Steps("kustomize install")
    tools, api = real_cluster.tools, cluster_api
    user_overlay = overlay(tmp_path / "overlay")
    rendered = list(yaml.safe_load_all(tools.run("kubectl", "kustomize", user_overlay)))
    (deployment,) = [o for o in rendered if o and o["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # config/manager names the image `make image` builds, by its short name.
    assert normalized(container["image"]) == real_cluster.images["controller"].ref
    assert container["resources"]["requests"] == REQUESTS
    assert deployment["spec"]["replicas"] == 2
    webhooks = [o for o in rendered if o and o["kind"].endswith("WebhookConfiguration")]
    assert len(webhooks) == 2
    assert not any(w["clientConfig"].get("caBundle") for o in webhooks for w in o["webhooks"])

    with steps.step("kubectl apply --server-side -k"):
        tools.run("kubectl", "apply", "--server-side", "-k", user_overlay)
    with steps.step("two controller pods Ready"):
        await controller_pods_ready(api, 2, container["image"])
    with steps.step("CA injected into both webhook configurations"):
        await eventually(lambda: ca_injected(api), "the pods' CA in every webhook", within=60)

    name = "kustomize-meet"
    with steps.step("a rendezvous LWS (2 groups of 3) meets"):
        lws = rendezvous_lws(name, real_cluster.images["rendezvous"])
        await create_once_admitted(api, lws, "default")
        await wait_ready(api, "default", name, 2, within=180)
        met = await eventually(
            lambda: groups_met(api, "default", name, 3),
            f"every group of {name} met",
            within=60,
            ignoring=(AssertionError, OSError),
        )
        assert len(met) == 2
    await api.delete(LEADERWORKERSETS, name, namespace="default")

    with steps.step("kubectl delete -k"):
        tools.run("kubectl", "delete", "-k", user_overlay, "--wait", timeout=300)
        await no_lws_pods_left(api)
    assert await api.get_or_none(DEPLOYMENTS, DEPLOYMENT, NAMESPACE) is None
    for resource, config_name in WEBHOOK_CONFIGS.items():
        assert await api.get_or_none(resource, config_name) is None
    left = tools.run("kubectl", "get", "crd", "-o", "name")
    assert not any(crd in left for crd in CRDS), left
    print(steps.summary())
