"""One version of a LeaderWorkerSet, read once: its effective settings beside the
object itself.

The controllers read objects as the API server returns them (dicts). Absent
members get the values the CRD schema and the admission webhook would have
given them, so an object that somehow skipped defaulting is still handled the
way a defaulted one is.

Decoding into the typed model is the costly part (it was the largest single cost
in a profile of 1,600 pods coming up: every pod event reads its LWS), so a view is
built once where an object enters the controller and handed down: by the
LeaderWorkerSet watch cache for each version it stores (`caches.LwsCaches.lws_view`),
and by whoever holds an object the cache never saw (an admission request, a
revision applied to the live object, the admission dry-run).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.go.intstr import IntOrString
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.types import (
    LeaderWorkerSet,
    LeaderWorkerTemplate,
    RollingUpdateConfiguration,
    group_identity_of,
    is_hash_mode,
)
from leaderworkerset.api.objects import JSON, meta_of


@dataclass(frozen=True)
class LwsView:
    """The effective settings of one version of a LeaderWorkerSet, and `obj`, the
    object they were read from, for what is taken from it whole (owner references,
    status, events). `obj` is shared with whoever built the view (the watch cache):
    never change it."""

    name: str
    namespace: str
    uid: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    replicas: int
    size: int
    partition: int
    max_unavailable: IntOrString
    max_surge: IntOrString
    rollout_type: str
    startup_policy: str
    subdomain_policy: str
    group_identity: str
    replacement_policy: str
    template: LeaderWorkerTemplate
    # spec.scheduling as stored (a copy), or None: Workload-Aware Scheduling is off for
    # this LWS. Nothing is defaulted into it: an absent or empty schedulingPolicy means
    # a gang of `size` pods (see api/leaderworkerset/scheduling_validation.is_gang).
    scheduling: JSON | None
    obj: JSON = field(repr=False, compare=False)

    @property
    def unique_per_replica(self) -> bool:
        return self.subdomain_policy == c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA

    @property
    def hash_mode(self) -> bool:
        return is_hash_mode(self.group_identity)

    @property
    def replaces_immediately(self) -> bool:
        """groupReplacementPolicy Immediate: a gated leader waits for nothing."""
        return self.replacement_policy == c.GROUP_REPLACEMENT_IMMEDIATE

    def annotation(self, key: str) -> str:
        return self.annotations.get(key, "")

    def leader_template(self) -> JSON:
        """A copy of leaderTemplate, or of workerTemplate when there is none."""
        return self.template.effective_leader_template()

    def worker_template(self) -> JSON:
        return copy.deepcopy(self.template.worker_template or {})


def view_of(lws: JSON) -> LwsView:
    """Decoded afresh on every call: build it once where the object comes in."""
    model, _ = LeaderWorkerSet.from_json(lws)
    meta = meta_of(lws)
    spec = model.spec
    template = (spec.leader_worker_template if spec else None) or LeaderWorkerTemplate()
    strategy = spec.rollout_strategy if spec else None
    config = (strategy.rolling_update_configuration if strategy else None) or (
        RollingUpdateConfiguration()
    )
    network = spec.network_config if spec else None
    return LwsView(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 0),
        labels=_strings(meta.get("labels")),
        annotations=_strings(meta.get("annotations")),
        replicas=_or(spec.replicas if spec else None, c.DEFAULT_REPLICAS),
        size=_or(template.size, c.DEFAULT_SIZE),
        partition=_or(config.partition, c.DEFAULT_PARTITION),
        max_unavailable=_or(config.max_unavailable, c.DEFAULT_MAX_UNAVAILABLE),
        max_surge=_or(config.max_surge, c.DEFAULT_MAX_SURGE),
        rollout_type=(strategy.type if strategy else None) or c.ROLLOUT_STRATEGY_ROLLING_UPDATE,
        startup_policy=(spec.startup_policy if spec else None) or c.STARTUP_POLICY_LEADER_CREATED,
        subdomain_policy=(network.subdomain_policy if network else None)
        or c.SUBDOMAIN_POLICY_SHARED,
        group_identity=group_identity_of(spec),
        replacement_policy=(spec.group_replacement_policy if spec else None)
        or c.GROUP_REPLACEMENT_POST_TERMINATION,
        template=template,
        scheduling=_scheduling(lws),
        obj=lws,
    )


def _scheduling(lws: JSON) -> JSON | None:
    spec = lws.get("spec")
    scheduling = spec.get("scheduling") if isinstance(spec, dict) else None
    return copy.deepcopy(scheduling) if isinstance(scheduling, dict) else None


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _strings(mapping: Any) -> dict[str, str]:
    if not isinstance(mapping, dict):
        return {}
    return {str(k): str(v) for k, v in mapping.items() if v is not None}
