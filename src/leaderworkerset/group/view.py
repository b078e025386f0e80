"""The effective settings of a LeaderWorkerSet, read once from its JSON.

The controllers read objects as the API server returns them (dicts). Absent
members get the values the CRD schema and the admission webhook would have
given them, so an object that somehow skipped defaulting is still handled the
way a defaulted one is.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass
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


# Decoding a LeaderWorkerSet into the typed model was the largest single cost in a
# profile of 1,600 pods coming up (every pod event reads its LWS). The view of a
# cached object is kept while the cache holds that very dict: an update replaces the
# dict, and a copy with another spec (a revision applied to the live object keeps its
# uid and resourceVersion) is a different dict, decoded afresh.
_VIEWS: OrderedDict[tuple[str, str], tuple[JSON, LwsView]] = OrderedDict()
_VIEWS_KEPT = 512


def view_of(lws: JSON) -> LwsView:
    meta = meta_of(lws)
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not (uid and version):
        return _decode(lws)
    key = (str(uid), str(version))
    kept = _VIEWS.get(key)
    if kept is not None and kept[0] is lws:
        _VIEWS.move_to_end(key)
        return kept[1]
    view = _decode(lws)
    _VIEWS[key] = (lws, view)
    _VIEWS.move_to_end(key)
    if len(_VIEWS) > _VIEWS_KEPT:
        _VIEWS.popitem(last=False)
    return view


def _decode(lws: JSON) -> LwsView:
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
    )


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _strings(mapping: Any) -> dict[str, str]:
    if not isinstance(mapping, dict):
        return {}
    return {str(k): str(v) for k, v in mapping.items() if v is not None}
