"""The per-group headless Service of a leader (subdomainPolicy UniquePerReplica)."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, controller_ref, meta_of, name_of, uid_of
from leaderworkerset.controllers.headless_service import headless_service
from leaderworkerset.group import names as naming
from leaderworkerset.group.ownership import pod_reference
from leaderworkerset.group.roles import group_index, group_key


def group_service_name(view: LwsView, leader_pod: JSON) -> str:
    """Ordinal: the leader pod's name. Hash: derived from the group key, by the same
    function the pod webhook uses for the leader's subdomain (the leader has no
    name yet at admission)."""
    if view.hash_mode:
        return naming.hash_group_service_name(view.name, group_key(leader_pod) or "")
    return name_of(leader_pod)


def group_service(view: LwsView, leader_pod: JSON) -> JSON:
    """Selects the leader and workers of one group through its group-index label (the
    group key in Hash mode); owned by the leader pod, so it goes with the group."""
    meta = meta_of(leader_pod)
    return headless_service(
        name=group_service_name(view, leader_pod),
        namespace=str(meta.get("namespace") or view.namespace),
        lws_name=view.name,
        selector={c.LABEL_SET_NAME: view.name, c.LABEL_GROUP_INDEX: group_index(leader_pod) or ""},
        owner=pod_reference(leader_pod),
    )


def owned_by_leader(service: JSON, leader_pod: JSON) -> bool:
    """Only the leader's own Service is the group's: in Hash mode two live groups can
    share a hostname prefix, and so a Service name, and anyone may have created a
    Service of that name before the group existed."""
    owner = controller_ref(service)
    return owner is not None and owner.get("uid") == uid_of(leader_pod)


def on_its_way_out(service: JSON, leader_pod: JSON) -> bool:
    """Going away: being deleted, or left by a predecessor of the same name (Ordinal
    mode recreates a leader under its old name; the new leader replaces the old one's
    Service, or the garbage collector removes it, that pod being gone)."""
    return bool(meta_of(service).get("deletionTimestamp")) or left_by_predecessor(
        service, leader_pod
    )


def left_by_predecessor(service: JSON, leader_pod: JSON) -> bool:
    """Owned by a pod of the leader's name that is not the leader: one that is gone,
    since names are unique and this leader holds it now."""
    owner = controller_ref(service)
    return bool(
        owner is not None
        and owner.get("kind") == "Pod"
        and owner.get("name") == name_of(leader_pod)
        and owner.get("uid") != uid_of(leader_pod)
    )


def owner_description(service: JSON) -> str:
    owner = controller_ref(service)
    if owner is None:
        return "no controller"
    return f"{owner.get('kind', 'object')} {owner.get('name', '')}"
