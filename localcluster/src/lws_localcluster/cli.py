"""``lws dev``: a playground cluster that outlives the command that started it.

``up`` spawns ``python -m lws_localcluster.cli serve`` in a new
session; that process owns the control plane's components (they die with it) and
stops them on SIGTERM, which is what ``down`` sends. Beside it ``up`` starts the
node simulator (``lws dev nodesim``) and ``lws controller``, each in a session of
its own (see :mod:`lws_localcluster.playground`); ``down`` stops them
first. ``fault`` reaches the running simulator through its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click

from leaderworkerset.tables import table
from lws_localcluster.binaries import ensure_binaries, ensure_node_binaries
from lws_localcluster.controlplane import (
    COMPONENTS,
    STATE_FILE,
    ControlPlane,
    default_workdir,
    pid_alive,
)
from lws_localcluster.node_lifecycle import PLAYGROUND
from lws_localcluster.nodesim.control import serve_faults
from lws_localcluster.nodesim.nodes import GPU, ZONE_LABEL, playground_nodes
from lws_localcluster.nodesim.simulator import DEFAULT_LEASE_INTERVAL, NodeSimulator
from lws_localcluster.playground import (
    CONTROLLER,
    NODESIM,
    Playground,
    PlaygroundError,
    find_kubectl,
)
from lws_localcluster.realnode.images import ensure_images
from lws_localcluster.realnode.layout import HOST_IP, NODE_NAME, SANDBOX_IMAGE_NAME
from lws_localcluster.realnode.node import RealNode, node_ready, write_insecure_registry

SERVE_LOG = "serve.log"


def _workdir(name: str, workdir: Path | None) -> Path:
    return (workdir or default_workdir(name)).resolve()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


name_option = click.option(
    "--name", default="default", show_default=True, help="Cluster name (selects the work dir)."
)
workdir_option = click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Work dir (default: $LWS_CACHE_DIR/clusters/NAME).",
)


@click.group()
def dev() -> None:
    """Run a local Kubernetes control plane (etcd, apiserver, kcm, scheduler)."""


def _print_hints(cp: ControlPlane) -> None:
    pg = Playground(cp.workdir)
    click.echo(f"control plane {cp.name!r} is up at {cp.server}")
    nodes = pg.state().get(NODESIM)
    if nodes and pg.pid(NODESIM):
        click.echo(
            f"  nodes:      {nodes['nodes']} simulated, {nodes['gpus']} {GPU} each, "
            f"over {nodes['zones']} zone(s)"
        )
    if pg.pid(CONTROLLER):
        click.echo(f"  controller: lws controller, metrics at {pg.controller_url('metrics')}")
    click.echo(f"  logs:       {cp.log_dir}")
    kubectl = find_kubectl()
    if kubectl is not None:
        click.echo(f"  kubectl:    {kubectl}")
        click.echo(f'  export PATH="{kubectl.parent}:$PATH"')
    else:
        click.echo("  kubectl:    not built yet; `bash hack/build-tools.sh` builds it")
    click.echo(f"  export KUBECONFIG={cp.kubeconfig}")
    click.echo("  kubectl apply -f config/samples/leader-and-worker.yaml")
    where = f"--name {cp.name}"
    if cp.workdir != default_workdir(cp.name).resolve():
        where = f"--workdir {cp.workdir}"
    click.echo(f"  inject faults with `lws dev fault {where} ...`; stop: lws dev down {where}")
    click.echo(str(cp.kubeconfig))


@dev.command()
@name_option
@workdir_option
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for health.")
@click.option(
    "--nodes", default=4, show_default=True, type=click.IntRange(min=0), help="Simulated nodes."
)
@click.option(
    "--gpus", default=8, show_default=True, type=click.IntRange(min=0), help=f"{GPU} per node."
)
@click.option(
    "--zones",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help=f"Zones ({ZONE_LABEL}) the nodes are dealt over.",
)
@click.option(
    "--controller/--no-controller",
    default=True,
    show_default=True,
    help="Run `lws controller` with its webhooks and the CRD installed.",
)
@click.option(
    "--real-node",
    is_flag=True,
    help=f"Add the node {NODE_NAME}, run by a real kubelet and containerd (root; "
    "docs/real-node.md). With --nodes 0 it is the only node.",
)
@click.option(
    "--insecure-registry",
    "insecure_registries",
    multiple=True,
    metavar="HOST:PORT",
    help="With --real-node: its containerd pulls from this plain-HTTP registry (e.g. a "
    'docker-registry on 127.0.0.1; docs/operations.md, "Publishing a release").',
)
def up(
    name: str,
    workdir: Path | None,
    timeout: float,
    nodes: int,
    gpus: int,
    zones: int,
    controller: bool,
    real_node: bool,
    insecure_registries: tuple[str, ...],
) -> None:
    """Start a playground in the background: control plane, nodes, controller.

    Run again on a running playground, it starts what is missing (a node simulator
    or a controller that is not running) and leaves the rest as it is.
    """
    wd = _workdir(name, workdir)
    cp = ControlPlane.attach(wd)
    if cp is None:
        cp = _start_control_plane(name, wd, timeout, real_node=real_node)
    elif not cp.is_healthy():
        raise click.ClickException(
            f"a control plane is recorded in {wd} but is not healthy; run `lws dev down`"
        )
    elif real_node and cp.host_ip is None:
        raise click.ClickException(
            f"the control plane in {wd} runs without a real node; `lws dev down` first"
        )
    if insecure_registries and cp.host_ip is None:
        raise click.ClickException("--insecure-registry is for the real node (--real-node)")
    for host in insecure_registries:
        paths = RealNode(wd).paths
        click.echo(f"{NODE_NAME} pulls from http://{host}: {write_insecure_registry(paths, host)}")
    pg = Playground(wd)
    try:
        if nodes and pg.pid(NODESIM) is None:
            started = time.monotonic()
            pg.start_nodesim(nodes, gpus, zones)
            click.echo(f"{nodes} nodes ready in {time.monotonic() - started:.1f}s", err=True)
        if controller and pg.pid(CONTROLLER) is None:
            started = time.monotonic()
            pg.start_controller(cp.kubeconfig)
            click.echo(f"controller ready in {time.monotonic() - started:.1f}s", err=True)
    except PlaygroundError as err:
        raise click.ClickException(f"{err}\n(`lws dev down` stops what did start)") from None
    _print_hints(cp)


def _start_control_plane(
    name: str, wd: Path, timeout: float, *, real_node: bool = False
) -> ControlPlane:
    # Built here rather than in the background so that progress is visible.
    binaries = ensure_binaries()
    if real_node:
        RealNode.check_host()
        ensure_node_binaries()
        ensure_images(SANDBOX_IMAGE_NAME)
    wd.mkdir(parents=True, exist_ok=True)
    log_path = wd / SERVE_LOG
    cmd = [sys.executable, "-m", "lws_localcluster.cli", "serve"]
    cmd += ["--name", name, "--workdir", str(wd), "--binaries", str(binaries)]
    cmd += ["--real-node"] if real_node else []
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=wd,
            start_new_session=True,
        )
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise click.ClickException(
                f"serve exited with code {proc.returncode}; {log_path}:\n{_tail(log_path)}"
            )
        cp = ControlPlane.attach(wd)
        if cp is not None and _serving(cp, proc.pid, real_node):
            click.echo(f"control plane started in {time.monotonic() - started:.1f}s", err=True)
            return cp
        if time.monotonic() - started > timeout:
            proc.terminate()
            raise click.ClickException(f"not healthy after {timeout}s; see {log_path}")
        time.sleep(0.2)


def _serving(cp: ControlPlane, owner: int, real_node: bool) -> bool:
    """Up and owned by the serve process just started (and its real node Ready)."""
    healthy = cp.owner_pid == owner and cp.is_healthy()
    return healthy and (not real_node or node_ready(cp))


@dev.command()
@name_option
@workdir_option
def down(name: str, workdir: Path | None) -> None:
    """Stop the controller, the node simulator, the control plane and its processes."""
    wd = _workdir(name, workdir)
    left_behind = Playground(wd).stop()
    if left_behind:
        raise click.ClickException(f"still running after stop: {left_behind}")
    cp = ControlPlane.attach(wd)
    if cp is None:
        # A SIGKILLed owner leaves its state file behind (its children die
        # with it); nothing else is left to stop.
        (wd / STATE_FILE).unlink(missing_ok=True)
        click.echo(f"no control plane running in {wd}")
        return
    pids = cp.pids
    cp.stop()
    left = [n for n, pid in pids.items() if pid_alive(pid)]
    if left:
        raise click.ClickException(f"still running after stop: {left}")
    click.echo(f"stopped control plane {cp.name!r} ({wd})")


@dev.command()
@name_option
@workdir_option
def status(name: str, workdir: Path | None) -> None:
    """Show the control plane, the nodes and the controller; exit 1 unless all is healthy."""
    wd = _workdir(name, workdir)
    cp = ControlPlane.attach(wd)
    if cp is None:
        click.echo(f"no control plane running in {wd}")
        sys.exit(1)
    health = cp.component_health()
    ports = cp.ports
    assert ports is not None
    port_of = {
        "etcd": ports.etcd_client,
        "kube-apiserver": ports.apiserver,
        "kube-controller-manager": ports.controller_manager,
        "kube-scheduler": ports.scheduler,
    }
    click.echo(f"name:       {cp.name}")
    click.echo(f"workdir:    {wd}")
    click.echo(f"server:     {cp.server}")
    click.echo(f"etcd:       {cp.etcd_endpoint}")
    click.echo(f"kubeconfig: {cp.kubeconfig}")
    click.echo(f"owner pid:  {cp.owner_pid}")
    pids = cp.pids
    components = [
        [c, str(pids.get(c, "-")), str(port_of[c]), "healthy" if health[c] else "UNHEALTHY"]
        for c in COMPONENTS
    ]
    click.echo(table(["COMPONENT", "PID", "PORT", "STATE"], components, indent="  "))
    healthy = all(health.values())
    if health["kube-apiserver"]:
        _show_nodes(cp)
    lifecycle = cp.node_lifecycle
    click.echo(f"node lifecycle: {lifecycle.describe() if lifecycle else 'off (nodes stay Ready)'}")
    healthy = _show_playground(Playground(wd)) and healthy
    click.echo(f"export KUBECONFIG={cp.kubeconfig}")
    if not healthy:
        sys.exit(1)


def _show_nodes(cp: ControlPlane) -> None:
    nodes: list[dict[str, Any]] = json.loads(cp.api_get("/api/v1/nodes")).get("items") or []
    click.echo(f"nodes:      {len(nodes)}")
    if nodes:
        click.echo(nodes_table(nodes))


def nodes_table(nodes: list[dict[str, Any]]) -> str:
    """The nodes of `lws dev status`: each one's Ready condition (with its status when
    not True: False is down, Unknown is silent), capacity and zone."""
    header = ["NAME", "READY", "CPU", "MEMORY", "GPU", "ZONE"]
    return table(header, [_node_row(node) for node in nodes], indent="  ")


def _node_row(node: dict[str, Any]) -> list[str]:
    status = node.get("status") or {}
    ready = next(
        (x.get("status") for x in status.get("conditions") or [] if x.get("type") == "Ready"),
        "?",
    )
    capacity = status.get("capacity") or {}
    zone = ((node.get("metadata") or {}).get("labels") or {}).get(ZONE_LABEL, "-")
    return [
        str((node.get("metadata") or {}).get("name", "")),
        "Ready" if ready == "True" else f"NotReady({ready})",
        str(capacity.get("cpu", "-")),
        str(capacity.get("memory", "-")),
        str(capacity.get(GPU, "0")),
        str(zone),
    ]


def _show_playground(pg: Playground) -> bool:
    """The simulator's and the controller's lines; False if a started one is unwell."""
    state, healthy = pg.state(), True
    if NODESIM in state:
        pid = pg.pid(NODESIM)
        ok = pid is not None and pg.nodesim_answers()
        healthy = healthy and ok
        text = "answering" if ok else f"NOT RUNNING (see {pg.log_path(NODESIM)})"
        click.echo(f"node simulator: pid {pid or '-'} {text}; faults on {pg.socket_path}")
    else:
        click.echo("node simulator: not started (lws dev up --nodes N)")
    if CONTROLLER in state:
        pid = pg.pid(CONTROLLER)
        ok = pid is not None and pg.controller_ready()
        healthy = healthy and ok
        text = "ready (/readyz 200)" if ok else f"NOT READY (see {pg.log_path(CONTROLLER)})"
        click.echo(f"controller: pid {pid or '-'} {text}")
        click.echo(f"  readyz:     {pg.controller_url('readyz')}")
        click.echo(f"  metrics:    {pg.controller_url('metrics')}")
        click.echo(f"  log:        {pg.log_path(CONTROLLER)}")
    else:
        click.echo("controller: not started (lws dev up --controller)")
    return healthy


@dev.command(hidden=True)
@name_option
@workdir_option
@click.option("--binaries", type=click.Path(path_type=Path), default=None)
@click.option("--real-node", is_flag=True)
def serve(name: str, workdir: Path | None, binaries: Path | None, real_node: bool) -> None:
    """Own a control plane until SIGTERM/SIGINT/SIGHUP (what `up` runs)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    wd = _workdir(name, workdir)
    node = RealNode(wd) if real_node else None
    cp = ControlPlane(
        wd,
        name=name,
        binaries=binaries,
        node_lifecycle=PLAYGROUND,
        host_ip=HOST_IP if node else None,
    )
    if node is not None:
        # Before the control plane, whose API server listens on the node's bridge.
        node.prepare()
    with cp, contextlib.ExitStack() as stack:
        if node is not None:
            node.start(cp)
            stack.callback(node.stop)
            click.echo(f"real node {NODE_NAME} Ready: pids {node.pids}", err=True)
        click.echo(f"control plane up: {cp.server} pids {cp.pids}", err=True)
        reported: set[str] = set()
        while not stop.wait(1.0):
            for c in set(COMPONENTS) - set(cp.pids) - reported:
                # Left for `lws dev status` to show; restarting would hide the cause.
                click.echo(f"{c} exited; see {cp.log_dir / (c + '.log')}", err=True)
                reported.add(c)
    click.echo("control plane stopped", err=True)


@dev.command(hidden=True)
@name_option
@workdir_option
@click.option("--nodes", default=4, type=click.IntRange(min=0))
@click.option("--gpus", default=8, type=click.IntRange(min=0))
@click.option("--zones", default=2, type=click.IntRange(min=0))
def nodesim(name: str, workdir: Path | None, nodes: int, gpus: int, zones: int) -> None:
    """Run the simulated nodes until SIGTERM/SIGINT/SIGHUP (what `up` runs)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_run_nodesim(Playground(_workdir(name, workdir)), nodes, gpus, zones))


async def _run_nodesim(pg: Playground, nodes: int, gpus: int, zones: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    # Heartbeats as often as the control plane's node lifecycle asks, which then owns the
    # nodes' condition taints (a control plane started before it had none).
    cp = ControlPlane.attach(pg.workdir)
    lifecycle = None if cp is None else cp.node_lifecycle
    # The nodes stay registered on stop: `down` ends the whole cluster right after, and
    # a simulator started again takes them over.
    sim = NodeSimulator(
        pg.workdir / "kubeconfig",
        playground_nodes(nodes, gpus, zones),
        delete_nodes_on_stop=False,
        lease_interval=DEFAULT_LEASE_INTERVAL if lifecycle is None else lifecycle.lease_interval,
        condition_taints=lifecycle is None,
    )
    # A fault names a pod that is already bound; no need to wait long for it.
    sim.lookup_timeout = 5.0
    async with sim:
        server = await serve_faults(sim, pg.socket_path)
        logging.info("%d nodes up; faults on %s", nodes, pg.socket_path)
        async with server:
            await stop.wait()
    pg.socket_path.unlink(missing_ok=True)


@dev.group()
@name_option
@workdir_option
@click.pass_context
def fault(ctx: click.Context, name: str, workdir: Path | None) -> None:
    """Inject a fault into the running node simulator (started by `lws dev up`)."""
    ctx.obj = Playground(_workdir(name, workdir))


def _fault_command(kind: str, help_text: str, target: str = "pod", container: bool = False) -> None:
    @click.pass_obj
    def run(playground: Playground, /, **args: Any) -> None:
        request = {"fault": kind, **{k: v for k, v in args.items() if v is not None}}
        try:
            playground.fault(request)
        except (PlaygroundError, ConnectionError, RuntimeError) as err:
            raise click.ClickException(str(err)) from None
        click.echo(f"{kind}: {args[target]}")

    run.__doc__ = help_text
    command: Any = run
    if kind == "crash":
        command = click.option(
            "--downtime",
            type=float,
            default=None,
            help="Seconds in CrashLoopBackOff (not ready) before the container runs again.",
        )(command)
    if kind in ("crash", "fail"):
        command = click.option("--exit-code", type=int, default=None, help="Exit code (1).")(
            command
        )
    if container:
        command = click.option(
            "-c", "--container", default=None, help="Container (default: the first)."
        )(command)
    if kind == "node-down":
        command = click.option(
            "--unreachable",
            is_flag=True,
            default=None,
            help="Report Ready=Unknown at once, without waiting for the grace period.",
        )(command)
        command = click.option(
            "--not-ready",
            is_flag=True,
            default=None,
            help="Report Ready=False first, as a kubelet that sees its node fail does.",
        )(command)
    if target == "pod":
        command = click.option("-n", "--namespace", default="default", show_default=True)(command)
    command = click.argument(target)(command)
    fault.command(kind)(command)


_fault_command("crash", "Crash a container and start it again (restartCount+1).", container=True)
_fault_command("fail", "Terminate the pod's containers: phase Failed.")
_fault_command("unready", "Make a container not ready (the pod NotReady).", container=True)
_fault_command("ready", "Undo `unready`.", container=True)
_fault_command("stall", "Keep the pod Terminating once it is deleted, until `release`.")
_fault_command("release", "Let a stalled pod finish terminating.")
_fault_command(
    "node-down",
    "Take a node down: no more heartbeats, its pods frozen; the node lifecycle controller "
    "marks it Unknown, taints it and evicts its pods.",
    target="node",
)
_fault_command("node-up", "Bring a node back: Ready, heartbeats, its pods resynced.", "node")


if __name__ == "__main__":
    dev()
