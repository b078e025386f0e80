"""The watch caches of the DisaggregatedSet controller.

The sets and RoleScalers whole; the LeaderWorkerSets and Services label-selected on
the set-name label (`disaggregatedset.x-k8s.io/name`) that everything a set makes
carries. All but the sets are indexed by that label, so a reconcile finds a set's
objects without a LIST. RoleScalers are cached whole (there are a few per set) so that
one someone else made under the name a set wants is seen too, without a GET.
"""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import (
    DISAGGREGATEDSETS,
    LEADERWORKERSETS,
    ROLE_SCALERS,
    SERVICES,
    Resource,
)
from leaderworkerset.runtime.cache import Informer, ListerWatcher, strip_managed_fields
from leaderworkerset.runtime.indexes import label_index_name
from leaderworkerset.runtime.metrics import RuntimeMetrics

BY_SET = label_index_name(c.LABEL_SET_NAME)


@dataclass
class DsCaches:
    sets: Informer
    leaderworkersets: Informer
    services: Informer
    scalers: Informer

    def all(self) -> list[Informer]:
        return [self.sets, self.leaderworkersets, self.services, self.scalers]

    @staticmethod
    def of_set(informer: Informer, namespace: str, set_name: str) -> list[JSON]:
        """The objects of `informer` labelled with this set's name."""
        return informer.by_index(BY_SET, f"{namespace}/{set_name}")


def build_ds_caches(
    client: ListerWatcher, namespace: str | None = None, *, metrics: RuntimeMetrics | None = None
) -> DsCaches:
    metrics = metrics or RuntimeMetrics()

    def labelled(resource: Resource, selected: bool = True) -> Informer:
        return Informer(
            client,
            resource,
            namespace=namespace,
            label_selector=c.LABEL_SET_NAME if selected else None,
            label_indexes=[c.LABEL_SET_NAME],
            transform=strip_managed_fields,
            metrics=metrics,
        )

    return DsCaches(
        sets=Informer(
            client,
            DISAGGREGATEDSETS,
            namespace=namespace,
            transform=strip_managed_fields,
            metrics=metrics,
        ),
        leaderworkersets=labelled(LEADERWORKERSETS),
        services=labelled(SERVICES),
        scalers=labelled(ROLE_SCALERS, selected=False),
    )
