"""A release published to a registry and installed from it on the real node, as
docs/operations.md ("Publishing a release") gives it: `make release` (built once and
cached, tests/toolkit/release.py) naming a docker-registry on this machine's
127.0.0.1, `skopeo copy --all` of the image index (amd64 and arm64) and `helm push` of
the chart; the node's containerd trusts that registry over plain HTTP (hosts.toml).
The session's `published` fixture (tests/fixtures/realnode.py) does that, and
tests/realnode's install (part of `make test`) is the short form: helm install from the
registry, groups Ready. This module is the long one.

Then, with no controller image imported by `ctr`: `helm install oci://.../charts/lws --version V`
with the chart's own values, and, after it is removed, `kubectl apply --server-side -f
manifests.yaml`. Each time the controller image is absent from containerd beforehand
(and its content: the one `make image` built and imported is the same amd64 image, and
is removed for the while), the registry's log shows containerd fetching the index,
the manifest, the config and the layers the node lacks, the controller pods become
Ready and one rendezvous group meets.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lws_localcluster.realnode.images import ctr, ensure_images, import_images, imported_digests

from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import NAMESPACE, RELEASE, Published, RealCluster
from tests.toolkit.cluster import wait_ready
from tests.toolkit.installs import (
    Steps,
    controller_pods_ready,
    create_once_admitted,
    no_lws_pods_left,
    remove_any_controller,
)
from tests.toolkit.registry import Registry
from tests.toolkit.release import BUILD_WITHIN, Release
from tests.toolkit.rendezvous import controller_pods, groups_met, rendezvous_lws
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(BUILD_WITHIN + 900)]


@pytest.fixture(scope="module")
def registry(published: Published) -> Registry:
    name = published.release.image.removeprefix(f"{published.registry.host}/")
    pushed = json.loads(published.registry.raw_manifest(name))
    assert {m["platform"]["architecture"] for m in pushed["manifests"]} == {"amd64", "arm64"}
    return published.registry


@pytest.fixture(scope="module")
async def api(real_cluster: RealCluster) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        print(f"removed: {remove_any_controller(real_cluster.tools) or 'nothing'}")
        await no_lws_pods_left(client)
        yield client
        remove_any_controller(real_cluster.tools)
        await no_lws_pods_left(client)
    finally:
        await client.close()
        # The image `make image` built, removed below, for the modules after this one.
        # Found or built again: a build of a changed tree (the release's, above) prunes
        # the archive the session started with.
        import_images(list(ensure_images("controller").values()))


def forget_controller_images(real_cluster: RealCluster, release: Release) -> None:
    """No controller image in the node's containerd, nor its content: the released one
    and `make image`'s (the same amd64 image under another name) go, with every other
    name the CRI gave them (`sha256:<config>`), and containerd's garbage collection
    takes their manifests, configs and the layers nothing else holds."""
    ours = {release.description["index"], *release.description["manifests"].values()}
    for ref, digest in imported_digests().items():
        if digest in ours or ref == real_cluster.images["controller"].ref:
            ctr("images", "rm", "--sync", ref)
    assert not ours & set(imported_digests().values())
    content = set(ctr("content", "ls", "-q").split())
    assert not ours & content, "containerd still holds the controller's manifests"


def pulled_through_registry(registry: Registry, release: Release, since: int) -> list[str]:
    """The registry paths containerd asked for after log line `since`."""
    uris = registry.requests("containerd")[since:]
    repository = release.repository.removeprefix(f"{registry.host}/")
    assert f"/v2/{repository}/manifests/{release.version}" in uris, uris
    arch = "amd64"  # this machine's; the platform containerd picks from the index
    manifest = release.description["manifests"][arch]
    assert f"/v2/{repository}/manifests/{manifest}" in uris, uris
    blobs = [u for u in uris if f"/v2/{repository}/blobs/" in u]
    # The config and the package layer; the Debian base layer is also the rendezvous
    # image's, which stays in containerd, so only that one may be skipped.
    assert len(blobs) >= 2, blobs
    return uris


async def one_group_meets(api: ApiClient, real_cluster: RealCluster, name: str) -> None:
    lws = rendezvous_lws(name, real_cluster.images["rendezvous"], replicas=1)
    await create_once_admitted(api, lws, "default")
    await wait_ready(api, "default", name, 1, within=180)
    met = await eventually(
        lambda: groups_met(api, "default", name, 3),
        f"the group of {name} met",
        within=60,
        ignoring=(AssertionError, OSError),
    )
    assert len(met) == 1
    await api.delete(LEADERWORKERSETS, name, namespace="default")
    # While the controller still runs: the teardown of a group is its work (finalizers),
    # and an uninstall right after the delete would strand the pods.
    await no_lws_pods_left(api)


async def assert_pods_run_the_pushed_image(api: ApiClient, release: Release) -> None:
    for pod in await controller_pods(api):
        (status,) = pod["status"]["containerStatuses"]
        assert status["image"] == release.image, status
        # The digest containerd resolved the tag to: the index the release pushed.
        assert status["imageID"].endswith(release.description["index"]), status


async def test_helm_install_from_the_registry_pulls_the_image_through_it(
    api: ApiClient, published: Published, registry: Registry, real_cluster: RealCluster
) -> None:
    steps = Steps("helm install from the registry")
    release = published.release
    forget_controller_images(real_cluster, release)
    since = len(registry.requests("containerd"))
    chart = published.chart
    with steps.step(f"helm install {chart} --version {release.version}"):
        real_cluster.tools.run(
            "helm", "install", RELEASE, chart, "--version", release.version, "--plain-http",
            "--namespace", NAMESPACE, "--create-namespace", "--wait", "--timeout", "5m",
            timeout=360,
        )  # fmt: skip
    with steps.step("two controller pods Ready"):
        await controller_pods_ready(api, 2, release.image)
    assert imported_digests()[release.image] == release.description["index"]
    await assert_pods_run_the_pushed_image(api, release)
    uris = pulled_through_registry(registry, release, since)
    print(f"containerd's requests to the registry: {len(uris)}")
    with steps.step("a rendezvous group of 3 meets"):
        await one_group_meets(api, real_cluster, "from-registry")
    with steps.step("helm uninstall"):
        real_cluster.tools.run("helm", "uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    print(steps.summary())


async def test_kubectl_apply_of_the_release_manifests_pulls_the_image_through_it(
    api: ApiClient, published: Published, registry: Registry, real_cluster: RealCluster
) -> None:
    steps = Steps("kubectl apply manifests.yaml")
    release = published.release
    remove_any_controller(real_cluster.tools)
    await no_lws_pods_left(api)
    forget_controller_images(real_cluster, release)
    since = len(registry.requests("containerd"))
    manifests: Path = release.manifests
    with steps.step("kubectl apply --server-side -f manifests.yaml"):
        real_cluster.tools.run("kubectl", "apply", "--server-side", "-f", manifests)
    with steps.step("two controller pods Ready"):
        await controller_pods_ready(api, 2, release.image)
    assert imported_digests()[release.image] == release.description["index"]
    await assert_pods_run_the_pushed_image(api, release)
    pulled_through_registry(registry, release, since)
    with steps.step("a rendezvous group of 3 meets"):
        await one_group_meets(api, real_cluster, "from-manifests")
    with steps.step("kubectl delete -f manifests.yaml"):
        real_cluster.tools.run("kubectl", "delete", "-f", manifests, "--wait", timeout=300)
        await no_lws_pods_left(api)
    print(steps.summary())
