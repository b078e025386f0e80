"""The headless Service both reconcilers create: the LWS reconciler the shared one
of a LWS, the pod reconciler the per-group one of a leader. Both publish
not-ready addresses so that group members resolve each other before they are
Ready. Each is created when absent and never modified."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON


def headless_service(
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
