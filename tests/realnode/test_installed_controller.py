"""The controller as users run it: a release's chart installed by Helm from a registry,
its pods from the image containerd pulled from there, reached by the API server through
the webhook Service, with only its chart's RBAC, its own certificates, and metrics
behind a ServiceAccount token."""

from __future__ import annotations

import json

import pytest
from lws_localcluster.manager_process import http_get
from lws_localcluster.realnode.images import imported_digests
from lws_localcluster.realnode.layout import NODE_NAME

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    LEADERWORKERSETS,
    LEASES,
    MUTATING_WEBHOOKS,
    SERVICES,
    VALIDATING_WEBHOOKS,
)
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.realnode import NAMESPACE, Published, RealCluster
from tests.toolkit.lws import lws_json
from tests.toolkit.rendezvous import controller_pods
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.cluster


async def test_two_controller_pods_from_the_registry_elect_one_leader(
    helm_installed: float, published: Published, real_api: ApiClient
) -> None:
    pods = await controller_pods(real_api)
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE_NAME
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"], status
        # The chart's own image (no value named one), resolved by containerd at the
        # registry to the index the release pushed.
        assert pod["spec"]["containers"][0]["image"] == published.release.image
        assert status["imageID"].endswith(published.release.description["index"]), status
    names = {p["metadata"]["name"] for p in pods}

    async def holder() -> str | None:
        lease = await real_api.get_or_none(LEASES, c.LEADER_ELECTION_LEASE_NAME, NAMESPACE)
        identity = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        return identity if any(identity.startswith(n) for n in names) else None

    # The holder's identity starts with its pod's hostname, which is the pod's name.
    await eventually(holder, "a controller pod holds the election lease", within=60)


async def test_the_webhooks_are_reached_through_their_service(
    helm_installed: float, real_api: ApiClient
) -> None:
    # The certificate the pod made for itself is in both configurations, which name the
    # Service, not a URL: every call below goes through kube-proxy to a pod.
    for resource in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
        configs = (await real_api.list(resource, label_selector=None))["items"]
        ours = [x for x in configs if any("leaderworkerset" in w["name"] for w in x["webhooks"])]
        assert ours, resource.plural
        for webhook in ours[0]["webhooks"]:
            client = webhook["clientConfig"]
            assert client.get("caBundle"), webhook["name"]
            assert client["service"]["namespace"] == NAMESPACE, client
    bad = lws_json("refused-by-webhook", replicas=1)
    bad["spec"]["leaderWorkerTemplate"]["size"] = 0
    with pytest.raises(ApiError) as refused:
        await real_api.create(LEADERWORKERSETS, bad, namespace="default")
    assert "spec.leaderWorkerTemplate.size" in str(refused.value)
    created = await real_api.create(
        LEADERWORKERSETS, lws_json("defaulted-by-webhook", replicas=0), namespace="default"
    )
    # Set only by the mutating webhook.
    assert created["spec"]["startupPolicy"] == "LeaderCreated"
    await real_api.delete(LEADERWORKERSETS, "defaulted-by-webhook", namespace="default")


async def test_metrics_are_scraped_through_the_service_with_a_token(
    helm_installed: float, real_cluster: RealCluster, real_api: ApiClient
) -> None:
    services = (await real_api.list(SERVICES, NAMESPACE))["items"]
    metrics = next(
        s for s in services if any(p.get("port") == 8443 for p in s["spec"].get("ports", []))
    )
    url = f"https://{metrics['spec']['clusterIP']}:8443/metrics"
    roles = json.loads(real_cluster.tools.run("kubectl", "get", "clusterroles", "-o", "json"))
    reader = next(
        r["metadata"]["name"]
        for r in roles["items"]
        if r["metadata"]["name"].startswith("lws")
        and any("/metrics" in (rule.get("nonResourceURLs") or []) for rule in r.get("rules", []))
    )
    kubectl = real_cluster.tools.run
    kubectl("kubectl", "create", "serviceaccount", "scraper", "-n", "default")
    kubectl(
        "kubectl",
        "create",
        "clusterrolebinding",
        "scraper-reads-lws-metrics",
        f"--clusterrole={reader}",
        "--serviceaccount=default:scraper",
    )
    token = kubectl("kubectl", "create", "token", "scraper", "-n", "default").strip()
    assert http_get(url, None)[0] == 401
    status, body = http_get(url, token)
    assert status == 200
    assert "controller_runtime_reconcile_total" in body
    # A token of an account without the role is authenticated, then refused.
    kubectl("kubectl", "create", "serviceaccount", "stranger", "-n", "default")
    stranger = kubectl("kubectl", "create", "token", "stranger", "-n", "default").strip()
    assert http_get(url, stranger)[0] == 403


async def test_the_image_was_pulled_from_the_registry_not_imported(
    helm_installed: float, published: Published
) -> None:
    release, registry = published.release, published.registry
    # containerd holds it under the registry's name, at the index's digest, and the
    # registry's log shows containerd asking for the tag: a pull, not an import.
    assert imported_digests()[release.image] == release.description["index"]
    repository = release.repository.removeprefix(f"{registry.host}/")
    asked = registry.requests("containerd")
    assert f"/v2/{repository}/manifests/{release.version}" in asked, asked
