"""The shared headless Service of a LWS (subdomainPolicy Shared), named
like the LWS and selecting all its pods."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.headless_service import headless_service
from leaderworkerset.group.ownership import lws_reference


def wants_shared_service(view: LwsView) -> bool:
    """An absent networkConfig means Shared."""
    return not view.unique_per_replica


def shared_service(view: LwsView) -> JSON:
    return headless_service(
        name=view.name,
        namespace=view.namespace,
        lws_name=view.name,
        selector={c.LABEL_SET_NAME: view.name},
        owner=lws_reference(view.obj),
    )
