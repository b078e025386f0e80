"""``lws dev``: a local control plane that outlives the command that started it.

``up`` spawns ``python -m leaderworkerset.localcluster.cli serve`` in a new
session; that process owns the components (they die with it) and stops them
on SIGTERM, which is what ``down`` sends.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import click

from leaderworkerset.localcluster.binaries import ensure_binaries
from leaderworkerset.localcluster.controlplane import (
    COMPONENTS,
    STATE_FILE,
    ControlPlane,
    default_workdir,
    pid_alive,
)

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
    click.echo(f"control plane {cp.name!r} is up at {cp.server}")
    click.echo(f"  logs:       {cp.log_dir}")
    click.echo(f"  export KUBECONFIG={cp.kubeconfig}")
    if shutil.which("kubectl"):
        click.echo("  kubectl get ns")
    else:
        # kubectl is in the module the control plane is built from.
        click.echo("  kubectl is not installed; to build it:")
        click.echo(
            "    (cd hack/controlplane && CGO_ENABLED=0 go build -trimpath"
            " -o ~/.local/bin/kubectl k8s.io/kubernetes/cmd/kubectl)"
        )
    click.echo(f"  stop with: lws dev down --name {cp.name}")
    click.echo(str(cp.kubeconfig))


@dev.command()
@name_option
@workdir_option
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for health.")
def up(name: str, workdir: Path | None, timeout: float) -> None:
    """Start a control plane in the background and wait until it is healthy."""
    wd = _workdir(name, workdir)
    existing = ControlPlane.attach(wd)
    if existing is not None:
        if not existing.is_healthy():
            raise click.ClickException(
                f"a control plane is recorded in {wd} but is not healthy; run `lws dev down`"
            )
        _print_hints(existing)
        return
    # Built here rather than in the background so that progress is visible.
    binaries = ensure_binaries()
    wd.mkdir(parents=True, exist_ok=True)
    log_path = wd / SERVE_LOG
    cmd = [sys.executable, "-m", "leaderworkerset.localcluster.cli", "serve"]
    cmd += ["--name", name, "--workdir", str(wd), "--binaries", str(binaries)]
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
        if cp is not None and cp.owner_pid == proc.pid and cp.is_healthy():
            break
        if time.monotonic() - started > timeout:
            proc.terminate()
            raise click.ClickException(f"not healthy after {timeout}s; see {log_path}")
        time.sleep(0.2)
    click.echo(f"started in {time.monotonic() - started:.1f}s", err=True)
    _print_hints(cp)


@dev.command()
@name_option
@workdir_option
def down(name: str, workdir: Path | None) -> None:
    """Stop the control plane and every process it started."""
    wd = _workdir(name, workdir)
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
    """Show health, ports, pids and kubeconfig; exit 1 unless all is healthy."""
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
    for c in COMPONENTS:
        state = "healthy" if health[c] else "UNHEALTHY"
        click.echo(f"  {c:<24} pid {pids.get(c, '-')!s:<8} port {port_of[c]:<6} {state}")
    if not all(health.values()):
        sys.exit(1)


@dev.command(hidden=True)
@name_option
@workdir_option
@click.option("--binaries", type=click.Path(path_type=Path), default=None)
def serve(name: str, workdir: Path | None, binaries: Path | None) -> None:
    """Own a control plane until SIGTERM/SIGINT/SIGHUP (what `up` runs)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    cp = ControlPlane(_workdir(name, workdir), name=name, binaries=binaries)
    with cp:
        click.echo(f"control plane up: {cp.server} pids {cp.pids}", err=True)
        reported: set[str] = set()
        while not stop.wait(1.0):
            for c in set(COMPONENTS) - set(cp.pids) - reported:
                # Left for `lws dev status` to show; restarting would hide the cause.
                click.echo(f"{c} exited; see {cp.log_dir / (c + '.log')}", err=True)
                reported.add(c)
    click.echo("control plane stopped", err=True)


if __name__ == "__main__":
    dev()
