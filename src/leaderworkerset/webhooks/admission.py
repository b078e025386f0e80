"""The admission webhooks' HTTP handlers, registered on the runtime's server.

Paths and names are upstream's, so the webhook configurations written for the
Go controller point at the same endpoints. The pod webhook reads the owning
LeaderWorkerSet from the watch cache to learn its group identity and
replacement policy.

Every handler runs on the webhook server's thread, beside the manager's loop:
it reads the caches (see `pod_mutator` for why that is safe) and reaches the
API client only through what `register_webhooks` wrapped with
`WebhookServer.on_manager_loop`; no handler is handed the client itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON, meta_of, name_of
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.group import names as naming
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.group.roles import group_key, is_leader
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.runtime.webhook import (
    AdmissionHandler,
    AdmissionResponse,
    WebhookServer,
    allow,
    deny,
    deny_status,
    errored,
    patched,
)
from leaderworkerset.webhooks.denial import Denied
from leaderworkerset.webhooks.hostnames import IssuedHostnames, LiveHostnames
from leaderworkerset.webhooks.leaderworkerset import (
    MUTATING_PATH,
    UNCONFIGURED,
    VALIDATING_PATH,
    TemplateCheck,
    Verdict,
    defaulted_or_refused,
    validate_with_workloads,
)
from leaderworkerset.webhooks.pods import (
    PodAdmissionContext,
    mutate_pod_in_place,
    snapshot_for_patch,
)

POD_MUTATING_PATH = "/mutate--v1-pod"
POD_VALIDATING_PATH = "/validate--v1-pod"

# The LeaderWorkerSet (namespace, name) as the API server has it, or None.
LwsFetch = Callable[[str, str], Awaitable[JSON | None]]


async def mutate_leaderworkerset(request: JSON) -> AdmissionResponse:
    obj = request.get("object")
    if not isinstance(obj, dict):
        return errored(400, "the admission request carries no object")
    answer = defaulted_or_refused(obj)
    if isinstance(answer, Verdict):
        return deny_status(invalid_status(obj, answer), answer.warnings)
    return patched(obj, answer)


def invalid_status(obj: JSON, verdict: Verdict) -> JSON:
    """A 422 Invalid with field causes, as the API server reports its own validation."""
    return {
        "code": 422,
        "reason": "Invalid",
        "message": verdict.message,
        "details": {
            "name": name_of(obj),
            "group": c.GROUP,
            "kind": c.KIND,
            "causes": [
                {"reason": cause.reason, "message": cause.message, "field": cause.field}
                for cause in verdict.causes
            ],
        },
    }


def leaderworkerset_validator(
    check: TemplateCheck | None = None,
    limits: SizeLimits | None = None,
    scheduling: SchedulingSupport = UNCONFIGURED,
) -> AdmissionHandler:
    """The LWS validating handler; `check` (when given) asks the API server about the
    workloads built from an LWS that passes its own rules; `limits` are the cluster's
    own bounds on its size; `scheduling` what the controller serves of spec.scheduling."""

    async def validate(request: JSON) -> AdmissionResponse:
        obj = request.get("object")
        if not isinstance(obj, dict):
            return errored(400, "the admission request carries no object")
        old = request.get("oldObject")
        meta = obj.setdefault("metadata", {})
        if request.get("namespace") and not meta.get("namespace"):
            meta["namespace"] = request["namespace"]
        verdict = await validate_with_workloads(
            str(request.get("operation", "CREATE")),
            obj,
            old if isinstance(old, dict) else None,
            check,
            limits,
            scheduling,
        )
        if verdict.allowed:
            return allow(warnings=verdict.warnings)
        return deny_status(invalid_status(obj, verdict), verdict.warnings)

    return validate


def pod_context(
    lws: LwsView | None,
    options: ControllerOptions,
    *,
    new_group_key: Callable[[str], str] = naming.random_group_key,
) -> PodAdmissionContext:
    """The pod's LeaderWorkerSet as the webhook needs it; a pod without one (or whose
    LeaderWorkerSet is gone) is admitted as an Ordinal one."""
    return PodAdmissionContext(
        group_identity=lws.group_identity if lws else c.GROUP_IDENTITY_ORDINAL,
        group_replacement_policy=lws.replacement_policy
        if lws
        else c.GROUP_REPLACEMENT_POST_TERMINATION,
        gang_scheduling=options.gang_scheduling,
        workload_scheduling=options.scheduling.kubernetes,
        new_group_key=new_group_key,
    )


class _TakenHostnames:
    """The hostnames a new key of one LeaderWorkerSet must not have: those of its
    live groups in the pod cache and those this webhook handed out lately."""

    def __init__(
        self, live: LiveHostnames, issued: IssuedHostnames, namespace: str, lws_name: str
    ) -> None:
        self.live, self.issued = live, issued
        self.namespace, self.lws_name = namespace, lws_name

    def __contains__(self, hostname: object) -> bool:
        if not isinstance(hostname, str):
            return False
        return self.issued.holds(self.namespace, self.lws_name, hostname) or self.live.holds(
            self.namespace, self.lws_name, hostname
        )


def pod_mutator(
    caches: LwsCaches,
    options: ControllerOptions,
    fetch_lws: LwsFetch | None,
    new_group_key: Callable[[str], str] = naming.random_group_key,
) -> Any:
    """The pod mutating handler. It runs on the webhook thread while the manager's loop
    changes the caches: reading a cached LeaderWorkerSet's view is one dict lookup,
    atomic under the GIL, and cached objects (with their views) are replaced, never
    changed in place, so what it returns stays whole; `LiveHostnames` locks what it
    shares with the pod cache's handlers; and `issued` is this handler's own, touched
    by no other thread."""
    issued = IssuedHostnames()
    live = LiveHostnames(caches.pods)

    async def owning_lws(namespace: str, name: str) -> LwsView | None:
        view = caches.lws_view(namespace, name)
        if view is not None or fetch_lws is None:
            return view
        # A cache still filling (a replica just started) must not make a Hash-mode
        # pod look like an Ordinal one: ask the API server.
        fetched = await fetch_lws(namespace, name)
        return None if fetched is None else view_of(fetched)

    async def mutate(request: JSON) -> AdmissionResponse:
        pod = request.get("object")
        if not isinstance(pod, dict):
            return errored(400, "the admission request carries no object")
        namespace = str(request.get("namespace") or meta_of(pod).get("namespace"))
        pod.setdefault("metadata", {}).setdefault("namespace", namespace)
        lws_name = str(((pod["metadata"].get("labels") or {}).get(c.LABEL_SET_NAME)) or "")
        lws = await owning_lws(namespace, lws_name) if lws_name else None
        ctx = pod_context(lws, options, new_group_key=new_group_key)
        brought = group_key(pod)
        # Only a Hash leader that still needs a key draws one.
        if ctx.hash_mode and is_leader(pod) and not brought:
            taken = _TakenHostnames(live, issued, namespace, lws_name)
            ctx = dataclasses.replace(ctx, hostnames_in_use=taken)
        # The request's object is this handler's own (decoded for this request), so it
        # is mutated as it is and diffed against a snapshot of what the mutation writes.
        original = snapshot_for_patch(pod)
        try:
            mutate_pod_in_place(pod, ctx)
        except Denied as exc:
            return deny(exc.message)
        drawn = group_key(pod)
        if ctx.hash_mode and is_leader(pod) and drawn and not brought:
            issued.add(namespace, lws_name, naming.hash_hostname(drawn))
        return patched(original, pod)

    return mutate


async def validate_pod(request: JSON) -> AdmissionResponse:
    # Registered for compatibility with upstream's configuration; it checks nothing.
    return allow()


def register_webhooks(
    server: WebhookServer,
    caches: LwsCaches,
    options: ControllerOptions,
    client: ApiClient | None = None,
    template_check: TemplateCheck | None = None,
) -> None:
    # The client and the template check (API calls) belong to the manager's loop: the
    # handlers, on the webhook thread, get them wrapped to run there.
    fetch_lws: LwsFetch | None = None
    if client is not None:
        api = client

        async def fetch(namespace: str, name: str) -> JSON | None:
            return await api.get_or_none(LEADERWORKERSETS, name, namespace)

        fetch_lws = server.on_manager_loop(fetch)
    check: TemplateCheck | None = None
    if template_check is not None:
        check = server.on_manager_loop(template_check)
    server.register(MUTATING_PATH, mutate_leaderworkerset)
    server.register(
        VALIDATING_PATH, leaderworkerset_validator(check, options.limits, options.scheduling)
    )
    server.register(POD_MUTATING_PATH, pod_mutator(caches, options, fetch_lws))
    server.register(POD_VALIDATING_PATH, validate_pod)
    server.register_conversion()
