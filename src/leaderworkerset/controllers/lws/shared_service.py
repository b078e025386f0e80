"""The shared headless Service of a LWS (subdomainPolicy Shared), named
like the LWS and selecting all its pods."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.headless_service import headless_service
from leaderworkerset.group.ownership import lws_reference
from leaderworkerset.group.view import view_of


def wants_shared_service(lws: JSON) -> bool:
    """An absent networkConfig means Shared."""
    return not view_of(lws).unique_per_replica


def shared_service(lws: JSON) -> JSON:
    view = view_of(lws)
    return headless_service(
        name=view.name,
        namespace=view.namespace,
        lws_name=view.name,
        selector={c.LABEL_SET_NAME: view.name},
        owner=lws_reference(lws),
    )
