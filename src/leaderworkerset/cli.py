"""`lws`: the command line of the project.

The local-cluster commands (`lws dev`, `lws demo`) live in another distribution,
`leaderworkerset-localcluster` (`localcluster/` in this repository), which the
controller never imports: they are looked up by name only when run, and a plain
install says what to install instead of failing with an import error.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from leaderworkerset import __version__
from leaderworkerset.api.disaggregatedset import constants as ds
from leaderworkerset.api.disaggregatedset.crd import (
    render_disaggregatedset_crd_yaml,
    render_scaler_crd_yaml,
)
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.crd import CRD_FILE, render_crd_yaml
from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.leaderworkerset.validation import (
    validate_create,
    validate_update,
    warnings_for,
)
from leaderworkerset.api.schema_check import check_against_schema
from leaderworkerset.controller_command import controller


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives, and the one line `lws --help` shows for it."""

    target: str  # "module:attribute"
    short_help: str

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        package = module.partition(".")[0]
        if package == LOCALCLUSTER_PACKAGE and importlib.util.find_spec(package) is None:
            raise click.UsageError(LOCALCLUSTER_MISSING)
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


LOCALCLUSTER_PACKAGE = "lws_localcluster"
LOCALCLUSTER_MISSING = (
    "the local cluster is not installed: it is the distribution "
    "leaderworkerset-localcluster, beside the controller in its repository; from a "
    "checkout, `pip install ./localcluster` (or `make setup`, which installs both)"
)

LAZY_COMMANDS = {
    "dev": LazyCommand(
        "lws_localcluster.cli:dev",
        "Run a local Kubernetes control plane (etcd, apiserver, kcm, scheduler).",
    ),
    "demo": LazyCommand(
        "lws_localcluster.demo:demo",
        "Local control plane + simulated nodes + the controller + a sample LeaderWorkerSet.",
    ),
}


class LazyGroup(click.Group):
    """Lists :data:`LAZY_COMMANDS` by their short help and imports one only when it is
    resolved to run (or to show its own help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = LAZY_COMMANDS.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        # A stand-in with the short help: enough for the group's command list.
        return click.Command(cmd_name, short_help=lazy.short_help)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name in LAZY_COMMANDS:
            command = LAZY_COMMANDS[name].load()
        return name, command, rest


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="lws")
def main() -> None:
    """LeaderWorkerSet controller, tools and local cluster."""


main.add_command(controller)


@main.command()
@click.argument("manifest", type=click.File("r"))
@click.option(
    "--old",
    "old_manifest",
    type=click.File("r"),
    help="The object as currently stored: validate MANIFEST as an update of it.",
)
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml")
@click.option(
    "--field-validation",
    type=click.Choice(["Strict", "Warn", "Ignore"], case_sensitive=False),
    default="Strict",
    show_default=True,
    help="Members the schema does not declare: refused, warned about or dropped, as the "
    "API server's fieldValidation (kubectl's --validate=strict|warn|ignore).",
)
def validate(manifest: Any, old_manifest: Any, output: str, field_validation: str) -> None:
    """Default and validate the LeaderWorkerSets in MANIFEST ('-' for stdin).

    Prints each defaulted object, or every error with its field path; exits 1
    when any object is invalid. Documents of other kinds are skipped.
    """
    old_by_name: dict[str, LeaderWorkerSet] = {}
    if old_manifest is not None:
        for doc in _leaderworkersets(old_manifest):
            stored, _ = LeaderWorkerSet.from_json(doc)
            old_by_name[stored.name] = default_leaderworkerset(stored)
    failed = False
    found = 0
    for doc in _leaderworkersets(manifest):
        found += 1
        failed |= not _check_and_print(doc, output, old_by_name, field_validation.lower())
    if found == 0:
        raise click.ClickException(f"no {c.KIND} ({c.API_VERSION}) found in the manifest")
    if failed:
        sys.exit(1)


@main.command("check-samples")
@click.option(
    "--samples",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("config/samples"),
    show_default=True,
)
def check_samples(samples: Path) -> None:
    """Default and validate every sample manifest and print the results."""
    failed = []
    for path in sorted(samples.glob("*.yaml")):
        click.echo(f"# {path}")
        with path.open() as stream:
            if not all([_check_and_print(doc, "yaml", {}) for doc in _leaderworkersets(stream)]):
                failed.append(path.name)
    if failed:
        raise click.ClickException(f"invalid samples: {', '.join(failed)}")


# Each CRD `lws crd generate` writes, by its plural.
CRD_RENDERERS: dict[str, Callable[[], str]] = {
    c.PLURAL: render_crd_yaml,
    ds.PLURAL: render_disaggregatedset_crd_yaml,
    ds.SCALER_PLURAL: render_scaler_crd_yaml,
}


@main.group()
def crd() -> None:
    """The CustomResourceDefinitions: LeaderWorkerSet, DisaggregatedSet and its RoleScaler."""


@crd.command("generate")
@click.option(
    "--kind",
    "plural",
    type=click.Choice(list(CRD_RENDERERS)),
    default=c.PLURAL,
    show_default=True,
    help="Which CRD, by its plural.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Write to this file (e.g. {CRD_FILE}) instead of stdout.",
)
@click.option("--check", is_flag=True, help="Exit 1 if --output differs from the generated CRD.")
def crd_generate(plural: str, output: Path | None, check: bool) -> None:
    """Generate a CRD from the API code."""
    rendered = CRD_RENDERERS[plural]()
    if output is None:
        click.echo(rendered, nl=False)
        return
    if check:
        current = output.read_text() if output.exists() else ""
        if current != rendered:
            raise click.ClickException(
                f"{output} is stale: run `lws crd generate --kind {plural} --output {output}`"
            )
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(rendered)
    click.echo(f"wrote {output}")


def _check_and_print(
    doc: dict[str, Any],
    output: str,
    stored: dict[str, LeaderWorkerSet],
    field_validation: str = "strict",
) -> bool:
    """Default and validate one object (as an update when it is in `stored`); print
    the defaulted object or its errors. True when valid."""
    findings = check_against_schema(doc)
    if findings.unknown and field_validation == "strict":
        # The API server stops at decoding: nothing else is checked.
        click.echo(f"Error: {findings.strict_error()}", err=True)
        return False
    if field_validation == "warn":
        for warning in findings.warnings():
            click.echo(f"Warning: {warning}", err=True)
    lws, decoded = LeaderWorkerSet.from_json(doc)
    defaulted = default_leaderworkerset(lws)
    previous = stored.get(lws.name)
    rules = validate_create(defaulted) if previous is None else validate_update(defaulted, previous)
    # The API server's order: the mutating webhook refuses what it cannot decode, the
    # schema refuses next, and only then do the validating webhook's rules run. The
    # first that refuses is what `kubectl apply` shows; the rest are printed after it,
    # so that one run lists everything to fix.
    stages = [errs for errs in (decoded, findings.errors, rules) if errs]
    for warning in warnings_for(defaulted):
        click.echo(f"Warning: {warning}", err=True)
    if stages:
        _print_errors(lws.name, stages[0], _not_in(stages[0], stages[1:]))
        return False
    click.echo(_render(defaulted.to_json(), output), nl=False)
    return True


def _leaderworkersets(stream: Any) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(stream) if d is not None]
    except yaml.YAMLError as exc:
        raise click.ClickException(f"cannot parse the manifest: {exc}") from exc
    return [
        d
        for d in docs
        if isinstance(d, dict) and d.get("kind") == c.KIND and _group_of(d) == c.GROUP
    ]


def _group_of(doc: dict[str, Any]) -> str:
    return str(doc.get("apiVersion", "")).partition("/")[0]


def _not_in(shown: list[FieldError], stages: list[list[FieldError]]) -> list[FieldError]:
    fields = {error.field for error in shown}
    return [error for stage in stages for error in stage if error.field not in fields]


def _print_errors(name: str, errors: list[FieldError], then: list[FieldError]) -> None:
    click.echo(f"{c.KIND}.{c.GROUP} {json.dumps(name)} is invalid:", err=True)
    for error in errors:
        click.echo(f"  * {error}", err=True)
    if then:
        click.echo("and, once those are fixed:", err=True)
        for error in then:
            click.echo(f"  - {error}", err=True)


def _render(obj: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(obj, indent=2) + "\n"
    return "---\n" + yaml.safe_dump(obj, sort_keys=False)
