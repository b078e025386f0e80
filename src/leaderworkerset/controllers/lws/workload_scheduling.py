"""The LeaderWorkerSet reconciler's Workload-Aware Scheduling step: the Workload and
the PodGroups a LeaderWorkerSet with `spec.scheduling` needs, made before the
leader workload may make pods, and PodGroups deleted once no pod names them.

The pass reads the Workload and PodGroups from watch caches and writes only what
is missing or wrong. Ordinal groups get their PodGroup before their leader exists
(the planned groups at the revision they are to run); a Hash group's key is drawn
when its leader pod is admitted, so its PodGroup follows the leader, which the
scheduler holds until it exists (docs/gang-scheduling.md). Every object is owned
by the LWS from its creation, so a crash at any step leaves nothing the garbage
collector would not remove, and the next pass picks up where it stopped. A Workload
or PodGroup under a needed name that the LWS does not control is left alone, and the
leader workload waits until it is gone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import (
    JSON,
    controller_ref,
    controller_uid,
    meta_of,
    timestamp_of,
)
from leaderworkerset.api.resources import POD_GROUPS, WORKLOADS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.group.workload_objects import (
    GroupRevision,
    groups_needed,
    only_priority_drifted,
    pod_group,
    pod_group_of_pod,
    pod_group_template,
    scheduling_of,
    stored_template,
    template_drift,
    with_min_count,
    workload,
)
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.client import ApiClient, ApiError

# A PodGroup no pod names is deleted only once it is this old: a Hash leader's
# PodGroup is made from the leader the pod cache shows, and a pass whose cache has
# not yet seen that leader must not take it for a leftover.
UNUSED_POD_GROUP_GRACE = 30.0
# How long a create of this process stands in for the cache that has not shown it.
CREATED_MEMORY = 30.0
# A failed step is tried again after this long (the API server refused or is away).
RETRY_AFTER = 5.0


@dataclass(frozen=True)
class SchedulingOutcome:
    """The WorkloadSchedulingReady condition of this pass, and what it allows."""

    ready: bool
    reason: str
    message: str
    # The leader workload must not be created or scaled: its pods would have no gang.
    blocked: bool = False
    # Seconds until the pass should run again (a retry, or a PodGroup to delete).
    requeue_after: float | None = None

    def condition(self, generation: int, now: str) -> JSON:
        return {
            "type": s.CONDITION_WORKLOAD_SCHEDULING_READY,
            "status": "True" if self.ready else "False",
            "observedGeneration": generation,
            "lastTransitionTime": now,
            "reason": self.reason,
            "message": self.message,
        }


def _refused(reason: str, message: str, *, retry: bool = False) -> SchedulingOutcome:
    return SchedulingOutcome(False, reason, message, True, RETRY_AFTER if retry else None)


def _not_controlled(view: LwsView, kind: str, obj: JSON) -> SchedulingOutcome:
    """A Workload or PodGroup of a name this LWS needs is controlled by something else,
    or by nothing. It is neither adopted, edited nor deleted. The pass is tried again
    on a timer: the deletion of an object whose owner reference does not name this
    LWS wakes no pass of it."""
    meta = meta_of(obj)
    owner = controller_ref(obj)
    if owner is None:
        whose = "it has no controller"
    else:
        whose = (
            f"its controller is {owner.get('kind')} {owner.get('name')} (uid {owner.get('uid')})"
        )
        if _same_name_lws(owner, view):
            # Two LeaderWorkerSets cannot share a name at once: the owner is gone.
            whose += (
                ", a deleted LeaderWorkerSet of this name; "
                "waiting for the garbage collector to remove it"
            )
    return _refused(
        s.REASON_INVALID_SCHEDULING_CONFIGURATION,
        f"{kind} {meta.get('namespace')}/{meta.get('name')} exists and is not controlled "
        f"by this LeaderWorkerSet: {whose}",
        retry=True,
    )


def _same_name_lws(owner: JSON, view: LwsView) -> bool:
    group = str(owner.get("apiVersion", "")).partition("/")[0]
    return owner.get("kind") == c.KIND and group == c.GROUP and owner.get("name") == view.name


def support_refusal(support: SchedulingSupport) -> SchedulingOutcome | None:
    """Why this controller cannot serve `spec.scheduling`, or None when it can."""
    if support.provider is None:
        return _refused(
            s.REASON_UNSUPPORTED_PROVIDER_CAPABILITY,
            "spec.scheduling requires a configured scheduler provider "
            "(gangSchedulingManagement.schedulerProvider: kubernetes)",
        )
    if support.provider != s.PROVIDER_KUBERNETES:
        return None
    if not support.feature_gate:
        return _refused(
            s.REASON_INVALID_SCHEDULING_CONFIGURATION,
            "spec.scheduling requires the WorkloadAwareScheduling feature gate "
            "(featureGates: {WorkloadAwareScheduling: true} in the manager Configuration)",
        )
    if not support.api_available:
        return _refused(
            s.REASON_API_NOT_AVAILABLE,
            "spec.scheduling needs the scheduling.k8s.io/v1beta1 Workload and PodGroup API, "
            "which this cluster does not serve: start kube-apiserver with "
            "--runtime-config=scheduling.k8s.io/v1beta1=true and the GenericWorkload "
            "feature gate (kube-scheduler and kube-controller-manager too), then restart "
            "the controller",
        )
    return None


@dataclass
class WorkloadScheduler:
    client: ApiClient
    caches: LwsCaches
    support: SchedulingSupport
    # Per LWS (`namespace/name`): PodGroup name -> when this process created it.
    _created: dict[str, dict[str, float]] = field(default_factory=dict)

    async def reconcile(
        self, view: LwsView, planned: Iterable[GroupRevision]
    ) -> SchedulingOutcome | None:
        """None when the LWS does not ask for Workload scheduling (or Volcano serves it)."""
        if scheduling_of(view) is None:
            return None
        refusal = support_refusal(self.support)
        if refusal is not None or not self.support.kubernetes:
            return refusal
        if view.annotation(s.ANNOTATION_GROUP_TEMPLATE_NAME):
            # KEP-6089: a parent workload's controller owns the Workload; a second one
            # made here would split the gang. Its discovery is not built yet.
            return _refused(
                s.REASON_PARENT_WORKLOAD_NOT_READY,
                f"{s.ANNOTATION_GROUP_TEMPLATE_NAME}: scheduling delegated to a parent "
                "Workload is not supported by this controller yet; no Workload or PodGroup "
                "is made for this LeaderWorkerSet",
            )
        template_or_outcome = await self._workload(view)
        if isinstance(template_or_outcome, SchedulingOutcome):
            return template_or_outcome
        leaders = self.caches.leaders_of(view.namespace, view.name)
        needed = groups_needed(view.name, planned, leaders)
        failed = await self._create_pod_groups(view, template_or_outcome, needed)
        if failed is not None:
            return failed
        return await self._delete_unused(view, needed)

    # -- the Workload ---------------------------------------------------------------

    async def _workload(self, view: LwsView) -> JSON | SchedulingOutcome:
        """The stored PodGroupTemplate the groups are made from."""
        desired = workload(view)
        stored = self._cached(self.caches.workloads, view.namespace, view.name)
        if stored is None:
            try:
                stored = await self.client.create(WORKLOADS, desired)
            except ApiError as exc:
                if not exc.already_exists:
                    return _refused(s.REASON_WORKLOAD_CREATE_FAILED, exc.message, retry=True)
                stored = await self.client.get(WORKLOADS, view.name, view.namespace)
        if controller_uid(stored) != view.uid:
            return _not_controlled(view, WORKLOADS.kind, stored)
        template = stored_template(stored)
        wanted = pod_group_template(view)
        if template is None:
            return _refused(
                s.REASON_INVALID_SCHEDULING_CONFIGURATION,
                f"Workload {view.namespace}/{view.name} has no PodGroup template "
                f"{s.WORKLOAD_TEMPLATE_NAME!r}",
            )
        drift = template_drift(template, wanted)
        if only_priority_drifted(drift):
            made = await self._make_again(view, stored, desired)
            if isinstance(made, SchedulingOutcome):
                return made
            stored, drift = made, []
            template = stored_template(stored) or wanted
        if drift:
            return _refused(
                s.REASON_INVALID_SCHEDULING_CONFIGURATION,
                f"Workload {view.namespace}/{view.name}: podGroupTemplates[0] "
                f"{', '.join(drift)} differ and cannot be changed",
            )
        resized = with_min_count(stored, wanted)
        if resized is not None:
            # A new size is a new revision: its PodGroups are made from the new
            # minimum while the old revision's keep theirs (KEP-666).
            try:
                stored = await self.client.replace(WORKLOADS, resized)
            except ApiError as exc:
                if exc.conflict:
                    return _refused(s.REASON_WORKLOAD_CREATE_FAILED, exc.message, retry=True)
                raise
            template = stored_template(stored) or template
        return template

    async def _make_again(
        self, view: LwsView, stored: JSON, desired: JSON
    ) -> JSON | SchedulingOutcome:
        """Delete the stored Workload (this one, by uid) and create the desired one. No
        PodGroup is owned by it and kube-scheduler does not read it, so the groups
        running meanwhile are untouched; a crash between the two steps leaves no
        Workload, which the next pass creates."""
        uid = str(meta_of(stored).get("uid", ""))
        try:
            await self.client.delete(
                WORKLOADS, view.name, view.namespace, preconditions={"uid": uid}
            )
        except ApiError as exc:
            if not exc.not_found:
                return _refused(s.REASON_WORKLOAD_CREATE_FAILED, exc.message, retry=True)
        try:
            made = await self.client.create(WORKLOADS, desired)
        except ApiError as exc:
            return _refused(s.REASON_WORKLOAD_CREATE_FAILED, exc.message, retry=True)
        return made

    # -- PodGroups ------------------------------------------------------------------

    async def _create_pod_groups(
        self, view: LwsView, template: JSON, needed: dict[str, GroupRevision]
    ) -> SchedulingOutcome | None:
        """Create each needed PodGroup that is missing. One of a needed name that this
        LWS does not control holds the leader workload: pods made now would join a
        gang that is not ours. One it controls is taken as it is, whatever its spec
        (docs/gang-scheduling.md, "A name already taken")."""
        for name, g in needed.items():
            cached = self._cached(self.caches.pod_groups, view.namespace, name)
            if cached is not None:
                if controller_uid(cached) != view.uid:
                    return _not_controlled(view, POD_GROUPS.kind, cached)
                continue
            created = self._created.setdefault(_lws_key(view), {})
            if _recent(created, name):
                continue
            try:
                await self.client.create(POD_GROUPS, pod_group(view, template, g.group, g.revision))
            except ApiError as exc:
                if exc.already_exists:
                    refusal = await self._judge_existing(view, name)
                    if refusal is not None:
                        return refusal
                    continue
                if exc.namespace_terminating:
                    raise
                return _refused(
                    s.REASON_POD_GROUP_CREATE_FAILED,
                    f"PodGroup {view.namespace}/{name}: {exc.message}",
                    retry=True,
                )
            created[name] = time.monotonic()
        return None

    async def _judge_existing(self, view: LwsView, name: str) -> SchedulingOutcome | None:
        """The create found the name taken by a PodGroup the cache does not show. The
        cache holds only PodGroups with the set-name label, so one made by someone else
        without it would never appear there: it is read from the API server."""
        try:
            found = await self.client.get_or_none(POD_GROUPS, name, view.namespace)
        except ApiError as exc:
            return _refused(
                s.REASON_POD_GROUP_CREATE_FAILED,
                f"PodGroup {view.namespace}/{name}: {exc.message}",
                retry=True,
            )
        if found is None:
            # Gone between the two calls: the next pass creates it.
            return _refused(
                s.REASON_POD_GROUP_CREATE_FAILED,
                f"PodGroup {view.namespace}/{name}: the create found the name taken and "
                "the read found nothing; trying again",
                retry=True,
            )
        if controller_uid(found) != view.uid:
            return _not_controlled(view, POD_GROUPS.kind, found)
        return None

    async def _delete_unused(
        self, view: LwsView, needed: dict[str, GroupRevision]
    ) -> SchedulingOutcome:
        unneeded = self._unneeded(view, needed)
        wait: float | None = None
        if unneeded:
            # Only now every pod of the LWS is read: in a steady state every PodGroup
            # is needed, and a pass reads no pod for this.
            pods = LwsCaches.of_lws(self.caches.pods, view.namespace, view.name)
            named = {pod_group_of_pod(pod) for pod in pods}
            unneeded = [meta for meta in unneeded if meta.get("name") not in named]
        for meta in unneeded:
            name = str(meta.get("name", ""))
            left = UNUSED_POD_GROUP_GRACE - _age(meta)
            if left > 0:
                wait = left if wait is None else min(wait, left)
                continue
            try:
                await self.client.delete(POD_GROUPS, name, view.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    return SchedulingOutcome(
                        False,
                        s.REASON_POD_GROUP_CLEANUP_BLOCKED,
                        f"PodGroup {view.namespace}/{name}: {exc.message}",
                        requeue_after=RETRY_AFTER,
                    )
            self._created.get(_lws_key(view), {}).pop(name, None)
        return SchedulingOutcome(True, s.REASON_READY, s.MESSAGE_READY, requeue_after=wait)

    def _unneeded(self, view: LwsView, needed: dict[str, GroupRevision]) -> list[JSON]:
        """Metadata of this LWS's PodGroups no planned group or leader needs."""
        informer = self.caches.pod_groups
        cached = LwsCaches.of_lws(informer, view.namespace, view.name) if informer else []
        out = []
        for pg in cached:
            meta = meta_of(pg)
            if meta.get("name") in needed or meta.get("deletionTimestamp"):
                continue
            owner = controller_ref(pg)
            if owner is not None and owner.get("uid") == view.uid:
                out.append(meta)
        return out

    # -- cache and memory -------------------------------------------------------------

    @staticmethod
    def _cached(informer: Informer | None, namespace: str, name: str) -> JSON | None:
        return informer.get(namespace, name) if informer is not None else None

    def forget(self, namespace: str, name: str) -> None:
        """The LWS is gone: what this process created for it is the collector's now."""
        self._created.pop(f"{namespace}/{name}", None)


def _lws_key(view: LwsView) -> str:
    return f"{view.namespace}/{view.name}"


def _recent(created: dict[str, float], name: str) -> bool:
    """This process created PodGroup `name` less than CREATED_MEMORY ago."""
    at = created.get(name)
    if at is None:
        return False
    if time.monotonic() - at < CREATED_MEMORY:
        return True
    del created[name]
    return False


def _age(meta: JSON) -> float:
    created = timestamp_of(meta.get("creationTimestamp"))
    if created is None:
        return UNUSED_POD_GROUP_GRACE
    return max(0.0, time.time() - created)
