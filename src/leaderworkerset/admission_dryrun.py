"""Admission asks the API server whether what the controller would build from a
LeaderWorkerSet is valid: a server-side dry-run create of the leader workload and
of one worker StatefulSet, built by the controllers' own functions.

The LWS schema keeps pod and claim templates loose (as upstream does), so a
template the StatefulSet or Deployment API refuses would otherwise be admitted and
then retried by the controller forever. Each refusal is reported against the LWS
field it came from. The check lives here, above both the controllers (which build
the objects) and the webhooks (which answer the API server), and is handed to the
webhook as a callable.

Only a 422 from the dry-run refuses the LWS: an API server that cannot answer
(unavailable, forbidden, slow) leaves admission as it was without the check.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import secrets
from dataclasses import dataclass

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import DEPLOYMENTS, STATEFULSETS, Resource
from leaderworkerset.controllers.lws.leader_deployment import leader_deployment
from leaderworkerset.controllers.lws.leader_statefulset import leader_statefulset
from leaderworkerset.controllers.pod.worker_statefulset import build_worker_statefulset
from leaderworkerset.controllers.revisions import snapshot_key
from leaderworkerset.group import names as naming
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError
from leaderworkerset.webhooks.leaderworkerset import Cause, TemplateCheck

log = logging.getLogger("webhook.dryrun")

# Within the webhook's own timeout (10 s by default), with room for the answer.
DRY_RUN_TIMEOUT = 5.0
# Dry-run objects are never stored; the random part keeps a create from meeting a
# live object of the same name (which would answer 409 and check nothing).
THROWAWAY_PREFIX = "lws-dry-run-"
THROWAWAY_UID = "00000000-0000-0000-0000-000000000000"

TEMPLATE = "spec.leaderWorkerTemplate"
ROLLING_UPDATE = "spec.rolloutStrategy.rollingUpdateConfiguration"
_VOLUME = re.compile(r"^spec\.template\.spec\.volumes\[([0-9]+)\]((?:[.\[].*)?)$")


@dataclass(frozen=True)
class Workload:
    """One object the controller would create, and where its template came from."""

    resource: Resource
    body: JSON
    # The LWS path of `spec.template`: leaderTemplate, or workerTemplate.
    template_path: str
    leader: bool

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", self.resource.kind))

    def volume_origin(self, index: int) -> tuple[str, int] | None:
        """Where `spec.template.spec.volumes[index]` of a 422 came from. The StatefulSet
        API validates the pod template with a volume per claim template: the claims
        first, a template volume of a claim's name in that claim's place, then the
        other template volumes. ("claim", i) or ("volume", j); None when out of range."""
        spec = self.body.get("spec") or {}
        origins: list[tuple[str, int]] = []
        slots: dict[str, int] = {}
        if self.resource == STATEFULSETS:
            for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
                slots.setdefault(str(meta_of(claim).get("name", "")), len(origins))
                origins.append(("claim", i))
        volumes = (spec.get("template") or {}).get("spec", {}).get("volumes") or []
        for j, volume in enumerate(volumes):
            slot = slots.get(str(volume.get("name", ""))) if isinstance(volume, dict) else None
            if slot is None:
                origins.append(("volume", j))
            else:
                origins[slot] = ("volume", j)
        return origins[index] if 0 <= index < len(origins) else None


def throwaway_name() -> str:
    return THROWAWAY_PREFIX + secrets.token_hex(4)


def stand_in(lws: JSON, name: str, namespace: str) -> JSON:
    """The LWS under the throwaway name, with no version or owner of its own."""
    copied = copy.deepcopy(lws)
    meta = copied.setdefault("metadata", {})
    for member in ("resourceVersion", "generation", "managedFields", "ownerReferences"):
        meta.pop(member, None)
    meta.update(name=name, namespace=namespace, uid=THROWAWAY_UID)
    return copied


def leader_pod(view: LwsView, leader: JSON, key: str) -> JSON:
    """The first group's leader as the pod reconciler would see it: what the worker
    StatefulSet takes from the leader is its name, identity labels and containers."""
    name = f"{view.name}-0"
    group_key = naming.ordinal_group_key(view.namespace, name)
    template_spec = (leader.get("spec") or {}).get("template", {}).get("spec") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": view.namespace,
            "uid": THROWAWAY_UID,
            "labels": {
                c.LABEL_SET_NAME: view.name,
                c.LABEL_WORKER_INDEX: c.LEADER_WORKER_INDEX,
                c.LABEL_GROUP_INDEX: group_key if view.hash_mode else "0",
                c.LABEL_GROUP_KEY: group_key,
                c.LABEL_TEMPLATE_REVISION_HASH: key,
            },
        },
        "spec": copy.deepcopy(template_spec),
    }


def workloads(lws: JSON, name: str, namespace: str) -> list[Workload]:
    """The leader workload and, when groups have workers, one worker StatefulSet,
    as the controllers build them for `lws` renamed `name`. Owner references are
    left out: the throwaway owner does not exist, and where an admission plugin
    checks the right to block an owner's deletion that would be a refusal about
    the controller, not about the template."""
    renamed = stand_in(lws, name, namespace)
    # Not an object any cache holds: read once here, for every builder below.
    view = view_of(renamed)
    key = snapshot_key(renamed)
    leader_path = f"{TEMPLATE}.leaderTemplate"
    if view.template.leader_template is None:
        leader_path = f"{TEMPLATE}.workerTemplate"
    if view.hash_mode:
        leader = Workload(DEPLOYMENTS, leader_deployment(view, key), leader_path, True)
    else:
        body = leader_statefulset(view, key, 0, view.replicas)
        leader = Workload(STATEFULSETS, body, leader_path, True)
    found = [leader]
    if view.size > 1:
        pod = leader_pod(view, leader.body, key)
        body = build_worker_statefulset(pod, view, view)
        found.append(Workload(STATEFULSETS, body, f"{TEMPLATE}.workerTemplate", False))
    for workload in found:
        meta_of(workload.body).pop("ownerReferences", None)
    return found


def lws_field(workload: Workload, field: str) -> str | None:
    """The LWS path a field of `workload` was built from; None for fields the
    controller alone decides."""
    volume = _VOLUME.match(field)
    origin = workload.volume_origin(int(volume.group(1))) if volume else None
    if volume is not None and origin is not None:
        kind, index = origin
        if kind == "claim":
            return f"{TEMPLATE}.volumeClaimTemplates[{index}].metadata.name"
        return f"{workload.template_path}.spec.volumes[{index}]{volume.group(2)}"
    for prefix, target in (
        ("spec.template", workload.template_path),
        ("spec.volumeClaimTemplates", f"{TEMPLATE}.volumeClaimTemplates"),
        (
            "spec.persistentVolumeClaimRetentionPolicy",
            f"{TEMPLATE}.persistentVolumeClaimRetentionPolicy",
        ),
        ("spec.strategy.rollingUpdate", ROLLING_UPDATE),
        ("spec.updateStrategy.rollingUpdate.maxUnavailable", f"{ROLLING_UPDATE}.maxUnavailable"),
        ("metadata.labels", "metadata.labels"),
        ("metadata.annotations", "metadata.annotations"),
    ):
        if field == prefix or field.startswith((prefix + ".", prefix + "[")):
            return target + field[len(prefix) :]
    if field == "spec.replicas":
        return "spec.replicas" if workload.leader else f"{TEMPLATE}.size"
    return None


def causes_of(workload: Workload, error: ApiError) -> list[Cause]:
    """The 422's causes, each against the LWS field it came from. A cause about a
    field the LWS does not set is reported against the whole template, naming the
    workload's field."""
    reported = (error.body.get("details") or {}).get("causes") or []
    out: list[Cause] = []
    for cause in reported:
        if not isinstance(cause, dict):
            continue
        field = str(cause.get("field") or "")
        reason = str(cause.get("reason") or "FieldValueInvalid")
        message = str(cause.get("message") or error.message)
        mapped = lws_field(workload, field) if field else None
        if mapped is None:
            where = f"{field}: " if field else ""
            message = f"Invalid value: the {_role(workload)} refuses it: {where}{message}"
            mapped, reason = workload.template_path, "FieldValueInvalid"
        out.append(Cause(mapped, reason, message))
    if not out:
        message = f"Invalid value: the {_role(workload)} refuses it: {error.message}"
        out.append(Cause(workload.template_path, "FieldValueInvalid", message))
    return out


def _role(workload: Workload) -> str:
    return f"{'leader' if workload.leader else 'worker'} {workload.kind} built from it"


def same_workloads(lws: JSON, old: JSON) -> bool:
    """Whether an update leaves every object the controller builds as it was."""
    name, namespace = THROWAWAY_PREFIX + "same", str(meta_of(lws).get("namespace") or "")
    new_bodies = [w.body for w in workloads(lws, name, namespace)]
    return new_bodies == [w.body for w in workloads(old, name, namespace)]


def dry_run_check(client: ApiClient, timeout: float = DRY_RUN_TIMEOUT) -> TemplateCheck:
    """The webhook's template check: the causes of every 422, in the order of the
    workloads, duplicates (leader and workers from one template) once."""

    async def create(workload: Workload, namespace: str) -> list[Cause]:
        try:
            await client.request(
                "POST",
                workload.resource.path(namespace),
                params={"dryRun": "All"},
                body=workload.body,
                request_timeout=timeout,
            )
        except ApiError as exc:
            if exc.status == 422:
                return causes_of(workload, exc)
            log.info("dry-run create of the %s skipped: %s", _role(workload), exc)
        except TRANSPORT_ERRORS as exc:
            log.info("dry-run create of the %s skipped: %r", _role(workload), exc)
        return []

    async def check(lws: JSON, old: JSON | None) -> list[Cause]:
        meta = meta_of(lws)
        if meta.get("deletionTimestamp"):
            return []
        namespace = str(meta.get("namespace") or "")
        try:
            if old is not None and same_workloads(lws, old):
                return []
            built = workloads(lws, throwaway_name(), namespace)
        except Exception:
            # A builder failing on an object the LWS rules accept is a bug here, not
            # the user's: admit as without the check, and say so loudly.
            log.exception("could not build the workloads of %s/%s", namespace, meta.get("name"))
            return []
        found = await asyncio.gather(*(create(w, namespace) for w in built))
        unique: dict[tuple[str, str], Cause] = {}
        for cause in (cause for causes in found for cause in causes):
            unique.setdefault((cause.field, cause.message), cause)
        return list(unique.values())

    return check
