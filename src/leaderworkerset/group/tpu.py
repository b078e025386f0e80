"""Whether a pod asks for TPUs: the pod webhook then injects the TPU variables,
and the pod reconciler tells the workers that their leader holds a TPU rank."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.go.quantity import parse_quantity
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON


def _nonzero_quantity(quantity: Any) -> bool:
    amount = parse_quantity(quantity)
    return amount is not None and amount != 0


def container_requests_tpus(container: JSON) -> bool:
    """A non-zero limit decides; requests count only when the limit is absent or zero."""
    resources = container.get("resources") or {}
    if _nonzero_quantity((resources.get("limits") or {}).get(c.TPU_RESOURCE_NAME)):
        return True
    return _nonzero_quantity((resources.get("requests") or {}).get(c.TPU_RESOURCE_NAME))


def tpu_containers(pod: JSON) -> list[JSON]:
    """Regular containers first, then init containers: this order fixes the worker ranks."""
    spec = pod.get("spec") or {}
    every = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return [container for container in every if container_requests_tpus(container)]


def pod_requests_tpus(pod: JSON) -> bool:
    return bool(tpu_containers(pod))
