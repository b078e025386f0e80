"""Hash mode: the leaders are the pods of one Deployment named like the LWS (see
docs/hash-mode.md). Each leader is a group named by a random key; the
Deployment's own rolling update and ReplicaSet scale-down act on whole groups
because a leader is Ready only when its group is (the group-ready gate).

The pod template is the one Ordinal mode uses. The group-ready readiness gate
and the PostTermination scheduling gate are added by the pod webhook at
admission (webhooks/pods.py), not here: gates are fixed at pod creation, and
putting them in the template too would be a second source of truth."""

from __future__ import annotations

from leaderworkerset.api.go.intstr import IntOrString, is_percent
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.leader_template import (
    leader_pod_template,
    leader_selector,
    leader_workload_metadata,
)


def leader_deployment(view: LwsView, key: str) -> JSON:
    """The server-side-apply body of the leader Deployment."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": leader_workload_metadata(view, key),
        "spec": {
            "replicas": view.replicas,
            "selector": {"matchLabels": leader_selector(view.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": deployment_rolling_update(view)},
            "template": leader_pod_template(view, key),
        },
    }


def deployment_rolling_update(view: LwsView) -> JSON:
    """maxSurge/maxUnavailable passed through (the Deployment scales percentages the
    same way: surge up, unavailable down). The Deployment API rejects 0/0, which the
    LWS allows with replicas 0 or reaches via /scale; the Deployment controller
    would then use maxUnavailable 1 anyway, so say so."""
    surge, unavailable = view.max_surge, view.max_unavailable
    if _is_zero(surge) and _is_zero(unavailable):
        unavailable = 1
    return {"maxSurge": surge, "maxUnavailable": unavailable}


def _is_zero(value: IntOrString) -> bool:
    if isinstance(value, int):
        return value == 0
    return is_percent(value) and int(value[:-1]) == 0
