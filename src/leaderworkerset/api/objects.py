"""Objects kept as plain JSON dicts, and reading their metadata (absent = empty).

`JSON` is the one alias for such an object (or any JSON object inside one).
"""

from __future__ import annotations

import datetime
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c

JSON = dict[str, Any]


def meta_of(obj: JSON | None) -> JSON:
    meta: JSON = (obj or {}).get("metadata") or {}
    return meta


def name_of(obj: JSON | None) -> str:
    return str(meta_of(obj).get("name") or "")


def namespace_of(obj: JSON | None) -> str:
    return str(meta_of(obj).get("namespace") or "")


def uid_of(obj: JSON | None) -> str:
    return str(meta_of(obj).get("uid") or "")


def marked_for_deletion(obj: JSON | None) -> bool:
    """Its deletion was asked for (the API server set its deletionTimestamp)."""
    return bool(meta_of(obj).get("deletionTimestamp"))


def orphaning(obj: JSON | None) -> bool:
    """Being deleted with `--cascade=orphan` (the collector's `orphan` finalizer): what
    it owns is to be kept."""
    return "orphan" in (meta_of(obj).get("finalizers") or ())


def labels_of(obj: JSON | None) -> dict[str, Any]:
    labels: dict[str, Any] = meta_of(obj).get("labels") or {}
    return labels


def annotations_of(obj: JSON | None) -> dict[str, Any]:
    annotations: dict[str, Any] = meta_of(obj).get("annotations") or {}
    return annotations


def revision_key_of(obj: JSON | None) -> str:
    """The template revision an object was built from or stands for (its revision-hash
    label): of a ControllerRevision, a leader StatefulSet or Deployment pod template, a
    worker StatefulSet, a group pod. "" when there is none: the controller never writes
    an empty key, so an empty label and no label both mean "no revision"."""
    return str(labels_of(obj).get(c.LABEL_TEMPLATE_REVISION_HASH) or "")


def timestamp_of(text: object) -> float | None:
    """An RFC 3339 time as the API writes it (whole seconds or with a fraction), as
    seconds since the epoch; None when absent or unreadable. No zone means UTC."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def format_time(moment: datetime.datetime | float | None = None) -> str:
    """metav1.Time as the API writes it (condition transitions, status times): RFC 3339
    in UTC, whole seconds. `moment` is an aware datetime or epoch seconds; None is now."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime.datetime | float | None = None) -> str:
    """metav1.MicroTime (Event times, Lease acquire and renew times): as `format_time`,
    with microseconds."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc(moment: datetime.datetime | float | None) -> datetime.datetime:
    if moment is None:
        return datetime.datetime.now(datetime.UTC)
    if isinstance(moment, datetime.datetime):
        return moment.astimezone(datetime.UTC)
    return datetime.datetime.fromtimestamp(moment, datetime.UTC)


def condition_of(obj: JSON | None, condition_type: str) -> JSON | None:
    """The status condition of that type (pods, nodes, most objects), if any."""
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == condition_type:
            return condition
    return None


def controller_ref(obj: JSON) -> JSON | None:
    """The ownerReference with ``controller: true`` (the object's own, not a copy);
    an object has at most one."""
    for ref in meta_of(obj).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def controller_uid(obj: JSON) -> str | None:
    """The UID of the object's controlling owner, if it has one."""
    ref = controller_ref(obj)
    return str(ref["uid"]) if ref and ref.get("uid") else None
