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
from leaderworkerset.api.disaggregatedset import validation as ds_validation
from leaderworkerset.api.disaggregatedset.crd import (
    render_disaggregatedset_crd_yaml,
    render_scaler_crd_yaml,
)
from leaderworkerset.api.disaggregatedset.defaults import default_disaggregatedset
from leaderworkerset.api.disaggregatedset.role_admission import configured_errors
from leaderworkerset.api.disaggregatedset.types import DisaggregatedSet
from leaderworkerset.api.errors import FieldError
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import validation as lws_validation
from leaderworkerset.api.leaderworkerset.crd import CRD_FILE, render_crd_yaml
from leaderworkerset.api.leaderworkerset.defaults import default_leaderworkerset
from leaderworkerset.api.leaderworkerset.scheduling import (
    FEATURE_WORKLOAD_AWARE_SCHEDULING,
    KNOWN_FEATURE_GATES,
    PROVIDER_KUBERNETES,
    PROVIDER_VOLCANO,
    SchedulingSupport,
)
from leaderworkerset.api.leaderworkerset.scheduling_validation import validate_scheduling
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet
from leaderworkerset.api.schema_check import check_against_schema
from leaderworkerset.controller_command import controller

NO_PROVIDER = "none"
# What `lws validate` assumes of the manager by default: everything spec.scheduling
# can ask for is served, so a manifest is judged on its own merits.
OFFLINE_SCHEDULING = SchedulingSupport(
    provider=PROVIDER_KUBERNETES, feature_gate=True, api_available=True
)


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
@click.option(
    "--scheduler-provider",
    type=click.Choice([PROVIDER_KUBERNETES, PROVIDER_VOLCANO, NO_PROVIDER]),
    default=PROVIDER_KUBERNETES,
    show_default=True,
    help="The manager's gangSchedulingManagement.schedulerProvider that spec.scheduling "
    "is judged against (none: not configured).",
)
@click.option(
    "--feature-gates",
    default=f"{FEATURE_WORKLOAD_AWARE_SCHEDULING}=true",
    show_default=True,
    help="The manager's featureGates, as Name=true|false,...",
)
@click.option(
    "--no-scheduling-api",
    is_flag=True,
    help="Judge spec.scheduling as for an API server that does not serve "
    "scheduling.k8s.io/v1beta1 Workload and PodGroup.",
)
def validate(
    manifest: Any,
    old_manifest: Any,
    output: str,
    field_validation: str,
    scheduler_provider: str,
    feature_gates: str,
    no_scheduling_api: bool,
) -> None:
    """Default and validate the LeaderWorkerSets and DisaggregatedSets in MANIFEST ('-'
    for stdin), as the API server and this project's webhooks would admit them.

    Prints each defaulted object, or every error with its field path; exits 1
    when any object is invalid. Documents of other kinds are skipped. spec.scheduling
    is judged as by a manager with the kubernetes scheduler provider and the
    WorkloadAwareScheduling gate on, on a cluster serving the API, unless told otherwise.
    """
    support = SchedulingSupport(
        provider=None if scheduler_provider == NO_PROVIDER else scheduler_provider,
        feature_gate=_gates(feature_gates).get(FEATURE_WORKLOAD_AWARE_SCHEDULING, False),
        api_available=not no_scheduling_api,
    )
    stored: dict[tuple[str, str], Any] = {}
    if old_manifest is not None:
        for judged, doc in _judged_documents(old_manifest):
            previous, _ = judged.decode(doc)
            stored[judged.kind, previous.name] = judged.default(previous)
    failed = False
    found = 0
    for judged, doc in _judged_documents(manifest):
        found += 1
        failed |= not _check_and_print(
            judged, doc, output, stored, field_validation.lower(), support
        )
    if found == 0:
        raise click.ClickException(
            f"no {c.KIND} ({c.API_VERSION}) or {ds.KIND} ({ds.API_VERSION}) found in the manifest"
        )
    if failed:
        sys.exit(1)


def _gates(text: str) -> dict[str, bool]:
    """`Name=true,Other=false` as the manager's featureGates map; an unknown name or a
    value other than true/false is a usage error."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if name not in KNOWN_FEATURE_GATES:
            supported = ", ".join(json.dumps(g) for g in KNOWN_FEATURE_GATES)
            raise click.BadParameter(
                f"unknown feature gate {json.dumps(name)}: supported values: {supported}",
                param_hint="--feature-gates",
            )
        if not sep or value.lower() not in ("true", "false"):
            raise click.BadParameter(
                f"{item!r}: want {name}=true or {name}=false", param_hint="--feature-gates"
            )
        gates[name] = value.lower() == "true"
    return gates


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
            checked = [_check_and_print(j, doc, "yaml", {}) for j, doc in _judged_documents(stream)]
            if not all(checked):
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


@dataclass(frozen=True)
class Judged:
    """How `lws validate` judges one kind: the steps of its admission, each the
    function the API server's defaulting or this project's webhook runs."""

    kind: str
    group: str
    decode: Callable[[dict[str, Any]], tuple[Any, list[FieldError]]]
    default: Callable[[Any], Any]
    validate_create: Callable[[Any], list[FieldError]]
    validate_update: Callable[[Any, Any], list[FieldError]]
    warnings: Callable[[Any], list[str]]
    # The rules that depend on the manager's configuration: spec.scheduling (and, for a
    # DisaggregatedSet, its roles judged as the LeaderWorkerSets the controller makes).
    configured: Callable[[Any, Any | None, SchedulingSupport], list[FieldError]] | None = None


JUDGED_KINDS = (
    Judged(
        c.KIND,
        c.GROUP,
        LeaderWorkerSet.from_json,
        default_leaderworkerset,
        lws_validation.validate_create,
        lws_validation.validate_update,
        lws_validation.warnings_for,
        validate_scheduling,
    ),
    # What webhooks/disaggregatedset.py runs: the CRD schema's defaults, then its rules
    # (all but the dry run of the roles' workloads, which needs a cluster).
    Judged(
        ds.KIND,
        ds.GROUP,
        DisaggregatedSet.from_json,
        default_disaggregatedset,
        ds_validation.validate_create,
        ds_validation.validate_update,
        ds_validation.warnings_for,
        configured_errors,
    ),
)


def _check_and_print(
    judged: Judged,
    doc: dict[str, Any],
    output: str,
    stored: dict[tuple[str, str], Any],
    field_validation: str = "strict",
    scheduling: SchedulingSupport = OFFLINE_SCHEDULING,
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
    obj, decoded = judged.decode(doc)
    defaulted = judged.default(obj)
    previous = stored.get((judged.kind, obj.name))
    rules = (
        judged.validate_create(defaulted)
        if previous is None
        else judged.validate_update(defaulted, previous)
    )
    if judged.configured is not None:
        rules = rules + judged.configured(defaulted, previous, scheduling)
    # The API server's order: the mutating webhook refuses what it cannot decode, the
    # schema refuses next, and only then do the validating webhook's rules run. The
    # first that refuses is what `kubectl apply` shows; the rest are printed after it,
    # so that one run lists everything to fix.
    stages = [errs for errs in (decoded, findings.errors, rules) if errs]
    for warning in judged.warnings(defaulted):
        click.echo(f"Warning: {warning}", err=True)
    if stages:
        _print_errors(judged, obj.name, stages[0], _not_in(stages[0], stages[1:]))
        return False
    click.echo(_render(defaulted.to_json(), output), nl=False)
    return True


def _judged_documents(stream: Any) -> list[tuple[Judged, dict[str, Any]]]:
    """The documents of the manifest that `lws validate` judges, each with its kind."""
    try:
        docs = [d for d in yaml.safe_load_all(stream) if d is not None]
    except yaml.YAMLError as exc:
        raise click.ClickException(f"cannot parse the manifest: {exc}") from exc
    by_kind = {(j.group, j.kind): j for j in JUDGED_KINDS}
    judged = [
        by_kind.get((_group_of(d), str(d.get("kind")))) if isinstance(d, dict) else None
        for d in docs
    ]
    return [(j, d) for j, d in zip(judged, docs, strict=True) if j is not None]


def _group_of(doc: dict[str, Any]) -> str:
    return str(doc.get("apiVersion", "")).partition("/")[0]


def _not_in(shown: list[FieldError], stages: list[list[FieldError]]) -> list[FieldError]:
    fields = {error.field for error in shown}
    return [error for stage in stages for error in stage if error.field not in fields]


def _print_errors(
    judged: Judged, name: str, errors: list[FieldError], then: list[FieldError]
) -> None:
    click.echo(f"{judged.kind}.{judged.group} {json.dumps(name)} is invalid:", err=True)
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
