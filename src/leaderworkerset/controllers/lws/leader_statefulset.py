"""Ordinal mode: the leaders are the pods of one StatefulSet named like the LWS
`leader_statefulset` is the server-side-apply body; the partition and
replicas come from `rolling_update.rolling_update_parameters`."""

from __future__ import annotations

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.leader_template import (
    add_claims_and_retention,
    copied_metadata,
    leader_pod_template,
    leader_selector,
)
from leaderworkerset.controllers.lws.rolling_update import leader_max_unavailable
from leaderworkerset.group.ownership import lws_reference
from leaderworkerset.group.view import view_of


def leader_statefulset(lws: JSON, key: str, partition: int, replicas: int) -> JSON:
    view = view_of(lws)
    labels, annotations = copied_metadata(
        view, {c.LABEL_SET_NAME: view.name, c.LABEL_TEMPLATE_REVISION_HASH: key}
    )
    # The desired replicas at apply time, so a later reconcile can tell a change of
    # spec.replicas mid-rollout from surge.
    annotations[c.ANNOTATION_REPLICAS] = str(view.replicas)
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
        "metadata": {
            "name": view.name,
            "namespace": view.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [lws_reference(lws)],
        },
        "spec": spec,
    }
