"""`lws demo`: a local control plane, simulated nodes, the controller and a sample
LeaderWorkerSet, with the groups shown as they come up; `--story hash` then tells the
Hash-mode replacement story (see :mod:`lws_localcluster.story`), `--story gang` the
gang-scheduling story (see :mod:`lws_localcluster.gang_story`).

Everything runs as children of this process (Kubernetes components) or inside
it (node simulator, controller); Ctrl-C stops all of it. The kubeconfig is
printed so that kubectl can be pointed at the cluster meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import click
import yaml

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.group.readiness import pod_terminating
from leaderworkerset.runtime.client import ApiClient, ApiError
from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.deploy import running_controller
from lws_localcluster.gang_story import gang_story
from lws_localcluster.nodesim.nodes import default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator
from lws_localcluster.story import StoryError, hash_story


def summary_line(lws: JSON, pods: list[JSON]) -> str:
    """The sample demo's progress line: the LeaderWorkerSet's status and its pods."""
    status = lws.get("status") or {}
    conditions = {
        x.get("type"): x.get("status") for x in status.get("conditions") or [] if x.get("type")
    }
    # A terminating pod stays Running through its grace period, but it is going.
    terminating = sum(1 for p in pods if pod_terminating(p))
    running = sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not pod_terminating(p)
    )
    going = f" ({terminating} terminating)" if terminating else ""
    return (
        f"groups ready {status.get('readyReplicas', 0)}/{lws['spec'].get('replicas')}, "
        f"updated {status.get('updatedReplicas', 0)}, pods running {running}/{len(pods)}"
        f"{going}, conditions {conditions}"
    )


async def _show_until_ready(api: ApiClient, namespace: str, name: str, within: float) -> bool:
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < within:
        lws = await api.get(LEADERWORKERSETS, name, namespace)
        pods = (await api.list(PODS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")).get(
            "items", []
        )
        line = summary_line(lws, pods)
        if line != last:
            click.echo(f"[{time.monotonic() - started:6.1f}s] {line}")
            last = line
        status = lws.get("status") or {}
        if status.get("readyReplicas") == lws["spec"].get("replicas") and any(
            x.get("type") == c.CONDITION_AVAILABLE and x.get("status") == "True"
            for x in status.get("conditions") or []
        ):
            return True
        await asyncio.sleep(0.5)
    return False


STORIES = ("sample", "hash", "gang", "all")


async def _demo(
    control_plane: ControlPlane, manifest: JSON, keep_running: bool, story: str
) -> bool:
    async with (
        NodeSimulator(control_plane.kubeconfig, default_nodes(4)) as sim,
        running_controller(control_plane.kubeconfig),
    ):
        api = ApiClient.from_kubeconfig(control_plane.kubeconfig)
        try:
            ok = True
            if story in ("sample", "all"):
                ok = await _sample(api, manifest)
            if ok and story in ("hash", "all"):
                click.echo("\n--- Hash mode: a crash, and a replacement that waits its turn ---")
                ok = await _tell(hash_story(api, sim))
            if ok and story in ("gang", "all") and not control_plane.serves_workload_api:
                # A release before v1.37 (LWS_K8S_VERSION): nothing to gang-schedule with.
                click.echo(
                    "\n--- Gangs: skipped, this Kubernetes release does not serve the "
                    "scheduling.k8s.io/v1beta1 Workload API (v1.37 on) ---"
                )
            elif ok and story in ("gang", "all"):
                click.echo("\n--- Gangs: two LeaderWorkerSets, room for one group ---")
                ok = await _tell(gang_story(api, sim))
            if keep_running and ok:
                click.echo(
                    f"\nexport KUBECONFIG={control_plane.kubeconfig}\n"
                    "kubectl get lws,statefulsets,pods -o wide\n"
                    "Ctrl-C stops the cluster."
                )
                await asyncio.Event().wait()
            return ok
        finally:
            await api.close()


async def _tell(story: Coroutine[Any, Any, None]) -> bool:
    try:
        await story
    except StoryError as err:
        click.echo(f"the story went wrong: {err}")
        return False
    return True


async def _sample(api: ApiClient, manifest: JSON) -> bool:
    namespace = manifest["metadata"].setdefault("namespace", "default")
    name = manifest["metadata"]["name"]
    with contextlib.suppress(ApiError):
        await api.delete(LEADERWORKERSETS, name, namespace)
    await api.create(LEADERWORKERSETS, manifest)
    click.echo(f"created LeaderWorkerSet {namespace}/{name}")
    ready = await _show_until_ready(api, namespace, name, within=300)
    click.echo("all groups ready" if ready else "not all groups became ready in 300s")
    return ready


@click.command()
@click.option(
    "--sample",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=Path("config/samples/worker-template-only.yaml"),
    show_default=True,
    help="The LeaderWorkerSet to create.",
)
@click.option(
    "--story",
    type=click.Choice(STORIES),
    default="sample",
    show_default=True,
    help="sample: the --sample LeaderWorkerSet; hash: the Hash-mode replacement story; "
    "gang: two LeaderWorkerSets competing for a full cluster, without and with gang "
    "scheduling; all: each in turn.",
)
@click.option(
    "--keep-running/--exit-when-ready",
    default=True,
    show_default=True,
    help="Keep the cluster up after the groups are ready (Ctrl-C stops it).",
)
@click.option("--name", default="demo", show_default=True, help="Name of the local cluster.")
def demo(sample: Path, story: str, keep_running: bool, name: str) -> None:
    """Local control plane + simulated nodes + the controller + a sample LeaderWorkerSet."""
    click.echo("building or finding the Kubernetes binaries (a cold build takes minutes)...")
    binaries = ensure_binaries()
    control_plane = ControlPlane(name=name, binaries=binaries)
    started = time.monotonic()
    with control_plane:
        click.echo(
            f"control plane up in {time.monotonic() - started:.1f}s; "
            f"kubeconfig {control_plane.kubeconfig}"
        )
        try:
            manifest: JSON = yaml.safe_load(sample.read_text())
            ok = asyncio.run(_demo(control_plane, manifest, keep_running, story))
        except KeyboardInterrupt:
            ok = True
    if not ok:
        raise click.ClickException(f"the {story} demo did not end as it should")
