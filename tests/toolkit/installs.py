"""The controller on the real node as users install and remove it (Helm releases of our
chart or upstream's, kustomize), for tests/e2e_real.

Each tests/e2e_real module starts with :func:`remove_any_controller`, so it does not
depend on what ran before it (tests/realnode's session-wide Helm release included), and
ends with it, so the next one finds no controller either.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lws_localcluster.realnode.images import BuiltImage, ensure_images
from lws_localcluster.realnode.images import import_images as into_containerd

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.realnode import NAMESPACE, RealCluster, Tools
from tests.toolkit.cluster import name_of
from tests.toolkit.install_tools import helm_env
from tests.toolkit.rendezvous import controller_pods, pod_ready
from tests.toolkit.waiting import eventually

# Both charts' and both kustomize trees' CRDs (upstream's adds DisaggregatedSet).
CRDS = (
    "leaderworkersets.leaderworkerset.x-k8s.io",
    "disaggregatedsets.disaggregatedset.x-k8s.io",
)
# Cluster-scoped objects of an install, found by the label every install here sets.
CLUSTER_KINDS = (
    "clusterrole,clusterrolebinding,mutatingwebhookconfiguration,validatingwebhookconfiguration"
)
NAME_LABEL = "app.kubernetes.io/name=lws"
# The webhook configurations' fixed names (upstream's chart labels them differently).
WEBHOOKS = (
    ("mutatingwebhookconfiguration", "lws-mutating-webhook-configuration"),
    ("validatingwebhookconfiguration", "lws-validating-webhook-configuration"),
)


def attempt(tools: Tools, tool: str, *args: str | Path, timeout: float = 300) -> str:
    """Run the tool and return its output whatever its exit code (for clean-ups that
    may find nothing to remove)."""
    env = helm_env(tools.helm_home, KUBECONFIG=str(tools.kubeconfig))
    done = subprocess.run(
        [str(tools.folder / tool), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=timeout,
    )
    return done.stdout + done.stderr


def remove_any_controller(tools: Tools) -> list[str]:
    """Uninstall every Helm release in lws-system, then delete what a kustomize install
    or a release leaves (the namespace, the labelled cluster-wide objects, the webhook
    configurations, the CRDs and with them every LeaderWorkerSet). Returns what was
    found, for the log."""
    found = []
    # helm 4 lists releases in every state by default.
    releases = tools.run("helm", "list", "-q", "-n", NAMESPACE).split()
    for release in releases:
        attempt(tools, "helm", "uninstall", release, "-n", NAMESPACE, "--wait", "--timeout", "2m")
        found.append(f"helm release {release}")
    leftovers = attempt(tools, "kubectl", "get", CLUSTER_KINDS, "-l", NAME_LABEL, "-o", "name")
    found += [line for line in leftovers.splitlines() if "/" in line]
    attempt(tools, "kubectl", "delete", CLUSTER_KINDS, "-l", NAME_LABEL, "--ignore-not-found")
    for kind, name in WEBHOOKS:
        attempt(tools, "kubectl", "delete", kind, name, "--ignore-not-found")
    for crd in CRDS:
        out = attempt(tools, "kubectl", "delete", "crd", crd, "--ignore-not-found", "--wait")
        found += [f"crd {crd}"] if "deleted" in out else []
    out = attempt(tools, "kubectl", "delete", "namespace", NAMESPACE, "--ignore-not-found")
    found += [f"namespace {NAMESPACE}"] if "deleted" in out else []
    # --wait on a namespace returns before its contents are gone; ask until it is.
    attempt(tools, "kubectl", "wait", "--for=delete", f"namespace/{NAMESPACE}", "--timeout=3m")
    return found


async def no_lws_pods_left(api: ApiClient, within: float = 180) -> None:
    """Until no pod of any LeaderWorkerSet is left (deleting the CRD deletes the sets;
    the garbage collector then removes their StatefulSets and pods)."""

    async def none_left() -> bool:
        pods = await api.list(PODS, None, label_selector=c.LABEL_SET_NAME)
        return not pods["items"]

    await eventually(none_left, "no LeaderWorkerSet pod left", within=within)


def import_images(cluster: RealCluster, *names: str) -> dict[str, BuiltImage]:
    """Build (or find) the named images and import them into the node's containerd."""
    images = ensure_images(*names)
    into_containerd(list(images.values()))
    return images


async def controller_pods_ready(api: ApiClient, count: int, image: str) -> list[JSON]:
    """Until exactly `count` controller pods run `image` and are Ready (and no other
    controller pod is left)."""

    async def ready() -> list[JSON] | None:
        pods = await controller_pods(api)
        running = [p for p in pods if p["spec"]["containers"][0]["image"] == image]
        if len(pods) == len(running) == count and all(pod_ready(p) for p in running):
            return running
        return None

    return await eventually(ready, f"{count} controller pods of {image} Ready", within=240)


async def admitted(call: Callable[[], Awaitable[JSON]], what: str) -> JSON:
    """Make a write that goes through the webhooks, retrying while the API server
    cannot reach them: kube-proxy routes the webhook Service to new controller pods a
    moment after they are Ready (upstream's e2e suite waits the same way before it
    starts). Any other refusal fails at once."""

    async def attempt_call() -> JSON | None:
        try:
            return await call()
        except ApiError as err:
            if err.status == 500 and "failed calling webhook" in err.message:
                return None
            raise

    return await eventually(attempt_call, f"{what} admitted by the webhooks", within=60)


async def create_once_admitted(api: ApiClient, obj: JSON, namespace: str) -> JSON:
    return await admitted(
        lambda: api.create(LEADERWORKERSETS, obj, namespace=namespace), f"{name_of(obj)} created"
    )


def normalized(image: str) -> str:
    """A short image name as the container runtime expands it (`leaderworkerset:0.1.0`
    is `docker.io/library/leaderworkerset:0.1.0`)."""
    first, _, rest = image.partition("/")
    if not rest:
        return f"docker.io/library/{image}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{image}"
    return image


@dataclass
class Steps:
    """Each step's wall time, printed as it ends (run with -s) and kept for a summary."""

    title: str
    taken: list[tuple[str, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        seconds = time.monotonic() - started
        self.taken.append((what, seconds))
        print(f"[{self.title}] {what}: {seconds:.1f}s", flush=True)

    def summary(self) -> str:
        width = max((len(what) for what, _ in self.taken), default=0)
        lines = [f"{what:<{width}}  {seconds:6.1f}s" for what, seconds in self.taken]
        total = sum(seconds for _, seconds in self.taken)
        return "\n".join([f"{self.title}:", *lines, f"{'total':<{width}}  {total:6.1f}s"])
