"""The `kubectl-lws` command (`kubectl lws` once on PATH)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from leaderworkerset.kubectl.connection import ConfigError, Target, target
from leaderworkerset.kubectl.describe import UnknownGroup, describe, find_group
from leaderworkerset.kubectl.render import group_objects, group_table
from leaderworkerset.kubectl.rows import rows_of
from leaderworkerset.kubectl.set_render import set_objects, set_text
from leaderworkerset.kubectl.set_rows import set_view
from leaderworkerset.kubectl.set_snapshot import SetNotFound, SetSnapshot, read_set
from leaderworkerset.kubectl.snapshot import LwsNotFound, Snapshot, read
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiError

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """kubectl's own flags; given on the subcommand or before it."""
    for option in reversed(
        [
            click.option("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file."),
            click.option("--context", metavar="NAME", help="The kubeconfig context to use."),
            click.option(
                "-n",
                "--namespace",
                metavar="NS",
                help="Namespace of the LeaderWorkerSet (default: the context's, else default).",
            ),
        ]
    ):
        command = option(command)
    return command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@connection_options
@click.pass_context
def main(
    ctx: click.Context, kubeconfig: str | None, context: str | None, namespace: str | None
) -> None:
    """Groups of a LeaderWorkerSet: their state, readiness, revision and placement,
    read-only, with the same kubeconfig flags as kubectl."""
    ctx.obj = {"kubeconfig": kubeconfig, "context": context, "namespace": namespace}


def _target(ctx: click.Context, **given: str | None) -> Target:
    before = ctx.obj or {}
    keys = ("kubeconfig", "context", "namespace")
    chosen = {key: given.get(key) or before.get(key) for key in keys}
    try:
        return target(chosen["kubeconfig"], chosen["context"], chosen["namespace"])
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def _read(where: Target, name: str, *, with_details: bool = False) -> Snapshot:
    async def run() -> Snapshot:
        client = where.client()
        try:
            return await read(client, name, where.namespace, with_details=with_details)
        finally:
            await client.close()

    return _run(run())


T = TypeVar("T")


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coroutine)
    except (LwsNotFound, SetNotFound) as exc:
        raise click.ClickException(str(exc)) from exc
    except ApiError as exc:
        raise click.ClickException(f"{exc.reason or exc.status}: {exc.message}") from exc
    except TRANSPORT_ERRORS as exc:
        raise click.ClickException(f"cannot reach the API server: {exc}") from exc


def _now() -> datetime:
    return datetime.now(UTC)


@main.command()
@click.argument("name")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["wide", "json", "yaml"]),
    help="wide: also the leader pod and worker StatefulSet; json/yaml: the rows as objects.",
)
@connection_options
@click.pass_context
def groups(
    ctx: click.Context,
    name: str,
    output: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> None:
    """One row per group of LeaderWorkerSet NAME."""
    where = _target(ctx, kubeconfig=kubeconfig, context=context, namespace=namespace)
    snapshot = _read(where, name)
    rows = rows_of(snapshot, _now())
    if output in ("json", "yaml"):
        click.echo(
            group_objects(
                rows,
                name=name,
                namespace=where.namespace,
                hash_mode=snapshot.hash_mode,
                output=output,
                gangs=snapshot.gang_scheduled,
            )
        )
        return
    if not rows:
        click.echo(f'No groups of leaderworkerset "{name}" in namespace "{where.namespace}".')
        return
    click.echo(
        group_table(
            rows,
            hash_mode=snapshot.hash_mode,
            wide=output == "wide",
            gangs=snapshot.gang_scheduled,
        )
    )


@main.command(name="describe")
@click.argument("name")
@click.argument("group")
@connection_options
@click.pass_context
def describe_command(
    ctx: click.Context,
    name: str,
    group: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> None:
    """Pods, worker StatefulSet, Services, recent Events and state of one GROUP (an
    ordinal, a group key or its first characters, or the leader pod's name)."""
    where = _target(ctx, kubeconfig=kubeconfig, context=context, namespace=namespace)
    snapshot = _read(where, name, with_details=True)
    try:
        found = find_group(snapshot, group)
    except UnknownGroup as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(describe(snapshot, found, _now()))


@click.command(name="disaggregatedset")
@click.argument("name")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["wide", "json", "yaml"]),
    help="wide: the group tables also show leader pods and worker StatefulSets; json/yaml: "
    "the same data as objects.",
)
@connection_options
@click.pass_context
def disaggregatedset_command(
    ctx: click.Context,
    name: str,
    output: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> None:
    """Roles, revisions, slices, LeaderWorkerSets and their groups of DisaggregatedSet
    NAME (also `kubectl lws ds NAME`)."""
    where = _target(ctx, kubeconfig=kubeconfig, context=context, namespace=namespace)

    async def run() -> SetSnapshot:
        client = where.client()
        try:
            return await read_set(client, name, where.namespace)
        finally:
            await client.close()

    view = set_view(_run(run()), _now())
    if output in ("json", "yaml"):
        click.echo(set_objects(view, output))
    else:
        click.echo(set_text(view, wide=output == "wide"))


main.add_command(disaggregatedset_command)
main.add_command(disaggregatedset_command, name="ds")

__all__ = ["main"]
