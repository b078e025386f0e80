"""Ordinal mode: the leaders are the pods of one StatefulSet named like the LWS
`leader_statefulset` is the server-side-apply body; the partition and
replicas come from `rolling_update.rolling_update_parameters`."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.leader_template import (
    add_claims_and_retention,
    leader_pod_template,
    leader_selector,
    leader_workload_metadata,
)
from leaderworkerset.controllers.lws.rolling_update import leader_max_unavailable


def leader_statefulset(view: LwsView, key: str, partition: int, replicas: int) -> JSON:
    # The desired replicas at apply time, so a later reconcile can tell a change of
    # spec.replicas mid-rollout from surge.
    metadata = leader_workload_metadata(view, key, **{c.ANNOTATION_REPLICAS: str(view.replicas)})
    spec: JSON = {
        # The shared Service name, also under UniquePerReplica: the pod webhook
        # points each leader's subdomain at its own Service instead.
        "serviceName": view.name,
        "replicas": replicas,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": leader_selector(view.name)},
        "updateStrategy": {
            "type": view.rollout_type,
            "rollingUpdate": {
                "maxUnavailable": leader_max_unavailable(view),
                "partition": partition,
            },
        },
        "template": leader_pod_template(view, key),
    }
    add_claims_and_retention(spec, view.template, view.namespace)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": spec,
    }
