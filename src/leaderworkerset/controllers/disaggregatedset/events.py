"""The events the DisaggregatedSet reconciler records about a set: upstream v0.10.0's
reasons, actions and notes."""

from __future__ import annotations

from typing import Final

from leaderworkerset.controllers.events import (
    ACTION_CREATE,
    ACTION_DELETE,
    ACTION_UPDATE,
    NORMAL,
    WARNING,
    Event,
)

REASON_ROLLING_UPDATE_STARTED: Final = "RollingUpdateStarted"
REASON_ROLLING_UPDATE_COMPLETED: Final = "RollingUpdateCompleted"
REASON_SCALING_UP: Final = "ScalingUp"
REASON_SCALING_DOWN: Final = "ScalingDown"
REASON_LWS_DELETED: Final = "LWSDeleted"
REASON_SCALER_CREATED: Final = "ScalerCreated"
REASON_SCALER_DELETED: Final = "ScalerDeleted"
REASON_SCALER_CONFLICT: Final = "ScalerConflict"
ACTION_MIGRATE: Final = "Migrate"
ACTION_CONFLICT: Final = "Conflict"


def rolling_update_started(revision: str) -> Event:
    note = f"Started rolling update to revision {revision}"
    return Event(NORMAL, REASON_ROLLING_UPDATE_STARTED, ACTION_UPDATE, note)


def rolling_update_completed(revision: str) -> Event:
    note = f"Completed rolling update to revision {revision}"
    return Event(NORMAL, REASON_ROLLING_UPDATE_COMPLETED, ACTION_UPDATE, note)


def scaling(role: str, lws_name: str, old: int, new: int) -> Event:
    if new > old:
        note = f"Scaling up {role} LWS {lws_name} from {old} to {new} replicas"
        return Event(NORMAL, REASON_SCALING_UP, ACTION_UPDATE, note)
    note = f"Scaling down {role} LWS {lws_name} from {old} to {new} replicas"
    return Event(NORMAL, REASON_SCALING_DOWN, ACTION_UPDATE, note)


def drained_lws_deleted(lws_name: str) -> Event:
    return Event(NORMAL, REASON_LWS_DELETED, ACTION_DELETE, f"Deleted drained LWS {lws_name}")


def removed_slice_lws_deleted(lws_name: str, slice_index: int) -> Event:
    note = f"Deleted LWS {lws_name} for removed slice {slice_index}"
    return Event(NORMAL, REASON_LWS_DELETED, ACTION_DELETE, note)


def legacy_lws_deleted(lws_name: str) -> Event:
    note = f"Deleted legacy slice-0 LWS {lws_name} to recreate it in slice-aware form"
    return Event(NORMAL, REASON_LWS_DELETED, ACTION_MIGRATE, note)


def scaler_created(name: str, role: str) -> Event:
    note = f"Created scaler {name} for role {role}"
    return Event(NORMAL, REASON_SCALER_CREATED, ACTION_CREATE, note)


def scaler_deleted(name: str, role: str) -> Event:
    note = f"Deleted scaler {name} (role {role} is no longer External)"
    return Event(NORMAL, REASON_SCALER_DELETED, ACTION_DELETE, note)


def scaler_conflict(name: str) -> Event:
    note = f"Scaler {name} exists but is not controlled by this DisaggregatedSet; not adopting"
    return Event(WARNING, REASON_SCALER_CONFLICT, ACTION_CONFLICT, note)
