"""The cluster's own limits on how big a LeaderWorkerSet may be (the manager
Configuration's `leaderWorkerSetLimits`; our addition, off by default as upstream has
none). A size in the millions is valid upstream, and kube-controller-manager's
StatefulSet controller then takes all the memory of the node it runs on: on a cluster
shared by many teams, admission is where to stop it."""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.api.errors import FieldError, invalid
from leaderworkerset.api.leaderworkerset.types import LeaderWorkerSet

SIZE = "spec.leaderWorkerTemplate.size"
REPLICAS = "spec.replicas"


@dataclass(frozen=True)
class SizeLimits:
    """None or 0: no limit."""

    max_size: int | None = None
    max_pods: int | None = None

    def errors(self, new: LeaderWorkerSet, old: LeaderWorkerSet | None = None) -> list[FieldError]:
        """What `new` exceeds. An update that leaves an object past a limit no bigger than
        it was is admitted, so objects created before the limit can still be edited and
        scaled down."""
        errs: list[FieldError] = []
        size, pods = _size(new), _size(new) * _replicas(new)
        old_size = _size(old) if old is not None else 0
        old_pods = old_size * _replicas(old) if old is not None else 0
        if self.max_size and size > self.max_size and size > old_size:
            errs.append(
                invalid(SIZE, size, f"must be no more than {self.max_size}, {_WHERE}.maxSize")
            )
        if self.max_pods and pods > self.max_pods and pods > old_pods:
            errs.append(
                invalid(
                    REPLICAS,
                    _replicas(new),
                    f"replicas x size is {pods} pods, more than {self.max_pods}, {_WHERE}.maxPods",
                )
            )
        return errs


_WHERE = "the limit this cluster sets in the manager Configuration's leaderWorkerSetLimits"


def _size(lws: LeaderWorkerSet) -> int:
    template = lws.spec.leader_worker_template if lws.spec else None
    return template.size if template is not None and template.size is not None else 1


def _replicas(lws: LeaderWorkerSet) -> int:
    return lws.spec.replicas if lws.spec is not None and lws.spec.replicas is not None else 1
