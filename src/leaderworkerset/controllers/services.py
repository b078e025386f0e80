"""Headless Services: the shared one of a LWS (spec §6.6, subdomainPolicy Shared) and
the per-group one of a leader (§7.6, UniquePerReplica). Both publish not-ready
addresses so that group members resolve each other before they are Ready. The
controllers create them when absent and never modify an existing one."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.group.ownership import lws_reference, pod_reference
from leaderworkerset.group.view import view_of
from leaderworkerset.webhooks.pods import hash_group_service_name

JSON = dict[str, Any]


def wants_shared_service(lws: JSON) -> bool:
    """An absent networkConfig means Shared (§6.2 step 10)."""
    return not view_of(lws).unique_per_replica


def shared_service(lws: JSON) -> JSON:
    view = view_of(lws)
    return _headless(
        name=view.name,
        namespace=view.namespace,
        lws_name=view.name,
        selector={c.LABEL_SET_NAME: view.name},
        owner=lws_reference(lws),
    )


def group_service_name(lws: JSON, leader_pod: JSON) -> str:
    """Ordinal: the leader pod's name. Hash: derived from the group key, by the same
    function the pod webhook uses for the leader's subdomain (the leader has no
    name yet at admission)."""
    view = view_of(lws)
    meta = leader_pod.get("metadata") or {}
    if view.hash_mode:
        group_key = str((meta.get("labels") or {}).get(c.LABEL_GROUP_KEY, ""))
        return hash_group_service_name(view.name, group_key)
    return str(meta.get("name", ""))


def group_service(lws: JSON, leader_pod: JSON) -> JSON:
    """Selects the leader and workers of one group through its group-index label (the
    group key in Hash mode); owned by the leader pod, so it goes with the group."""
    view = view_of(lws)
    meta = leader_pod.get("metadata") or {}
    group_index = str((meta.get("labels") or {}).get(c.LABEL_GROUP_INDEX, ""))
    return _headless(
        name=group_service_name(lws, leader_pod),
        namespace=str(meta.get("namespace") or view.namespace),
        lws_name=view.name,
        selector={c.LABEL_SET_NAME: view.name, c.LABEL_GROUP_INDEX: group_index},
        owner=pod_reference(leader_pod),
    )


def _headless(
    name: str, namespace: str, lws_name: str, selector: dict[str, str], owner: JSON
) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.LABEL_SET_NAME: lws_name},
            "ownerReferences": [owner],
        },
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True},
    }
