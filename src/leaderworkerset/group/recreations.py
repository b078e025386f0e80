"""What the restart policy remembers about each group it recreated, as pure functions.

Two records live on the LeaderWorkerSet, both keyed by group (the group-index label: the
ordinal in Ordinal mode, the 40-character key in Hash mode), so that they outlive the
leader pods they count:

- upstream's restart budget (`maxGroupRestarts`, upstream #877): `group-restart-counts`,
  {group: restarts}, kept only while a budget is set, as upstream does; a group whose
  count is past the budget is not recreated again and the LeaderWorkerSet is `Failed`;
- our group back-off: `group-recreations`, {group: {"recent": n, "last": time,
  "notBefore": time}}, the recreations since the group last ran quiet for `reset_after`
  seconds, when the last one was, and when the next may be. The n-th recent recreation
  waits `initial * 2^(n-1)` (at most `cap`) after the one before it, like a kubelet's
  CrashLoopBackOff for a whole group.

A Hash group is replaced by a group with a new key, so a replacement leader takes over
both records of a recreated group that has no live leader any more (`claimable`): the
budget and the back-off follow the slot, not the key.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from leaderworkerset.api.leaderworkerset import constants as c

# The kubelet's CrashLoopBackOff numbers: 10 s doubling to 5 min, forgotten after
# 10 min without a restart.
DEFAULT_INITIAL_BACKOFF: Final = 10.0
DEFAULT_MAX_BACKOFF: Final = 300.0
DEFAULT_BACKOFF_RESET: Final = 600.0
# A group's creationTimestamp has whole seconds; a recreation recorded in the same
# second as a leader's creation may have come just before it.
_SECOND: Final = 1.0


class RecordError(ValueError):
    """An annotation that is not what the controller writes (edited by hand)."""


@dataclass(frozen=True)
class Recreation:
    recent: int
    last: float  # seconds since the epoch
    # When the back-off lets the next recreation happen, as the controller computed it:
    # what `kubectl lws`, which does not know the controller's settings, shows.
    not_before: float | None = None
    # The UID of a leader whose group's recreation waits out the back-off: a controller
    # that restarts meanwhile still recreates the group when the wait is over, even
    # when the pod that failed (a deleted worker) is long gone.
    pending: str | None = None


@dataclass(frozen=True)
class BackoffPolicy:
    """initial 0 turns the back-off off: every recreation happens at once, as upstream."""

    initial: float = DEFAULT_INITIAL_BACKOFF
    cap: float = DEFAULT_MAX_BACKOFF
    reset_after: float = DEFAULT_BACKOFF_RESET

    @property
    def enabled(self) -> bool:
        return self.initial > 0

    def recent(self, record: Recreation | None, now: float) -> int:
        """Recreations that still count: none once the group has run `reset_after`."""
        if record is None or now - record.last >= self.reset_after:
            return 0
        return record.recent

    def delay(self, recent: int) -> float:
        """How long after the last recreation the next may happen."""
        if recent <= 0 or not self.enabled:
            return 0.0
        # Doubling past the cap adds nothing; an exponent past ~1,000 would overflow.
        doublings = min(recent - 1, 64)
        return float(min(self.initial * 2.0**doublings, self.cap))

    def due(self, record: Recreation | None, now: float) -> float:
        """When the group may be recreated next (now or earlier: at once)."""
        recent = self.recent(record, now)
        if record is None or recent == 0 or not self.enabled:
            return now
        return record.last + self.delay(recent)

    def next_record(self, record: Recreation | None, now: float) -> Recreation:
        recent = self.recent(record, now) + 1
        wait = self.delay(recent)
        return Recreation(recent, now, now + wait if wait else None)


@dataclass(frozen=True)
class GroupRecords:
    """Both records of one LeaderWorkerSet, as read from its annotations."""

    counts: dict[str, int]
    recreations: dict[str, Recreation]

    @property
    def empty(self) -> bool:
        return not self.counts and not self.recreations

    def count(self, group: str) -> int:
        return self.counts.get(group, 0)

    def with_recreation(self, group: str, record: Recreation, count: int | None) -> GroupRecords:
        counts = dict(self.counts)
        if count is not None:
            counts[group] = count
        return GroupRecords(counts, {**self.recreations, group: record})

    def moved(self, old: str, new: str) -> GroupRecords:
        """The records of group `old` now belong to group `new` (a Hash replacement)."""
        counts = dict(self.counts)
        recreations = dict(self.recreations)
        if old in counts:
            counts[new] = counts.pop(old)
        if old in recreations:
            recreations[new] = recreations.pop(old)
        return GroupRecords(counts, recreations)

    def annotations(self) -> dict[str, str | None]:
        """The two annotations as a merge patch writes them (None removes one)."""
        return {
            c.ANNOTATION_GROUP_RESTART_COUNTS: _dump(self.counts) if self.counts else None,
            c.ANNOTATION_GROUP_RECREATIONS: (
                _dump({group: _entry(r) for group, r in self.recreations.items()})
                if self.recreations
                else None
            ),
        }


def _entry(record: Recreation) -> dict[str, object]:
    entry: dict[str, object] = {"recent": record.recent, "last": format_epoch(record.last)}
    if record.not_before is not None:
        entry["notBefore"] = format_epoch(record.not_before)
    if record.pending:
        entry["pending"] = record.pending
    return entry


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def format_epoch(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_epoch(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise RecordError(f"not an RFC 3339 time: {text!r}") from exc


def read_records_leniently(
    annotations: Mapping[str, str],
) -> tuple[GroupRecords, list[RecordError]]:
    """Both records, each read on its own: one edited into something unreadable is
    taken as empty (and reported) without losing the other."""
    problems: list[RecordError] = []
    try:
        counts = _read_counts(annotations)
    except RecordError as exc:
        counts, problems = {}, [*problems, exc]
    try:
        recreations = _read_recreations(annotations)
    except RecordError as exc:
        recreations, problems = {}, [*problems, exc]
    return GroupRecords(counts, recreations), problems


def _json_object(annotations: Mapping[str, str], name: str) -> dict[str, object]:
    """The annotation's JSON object ({} when absent)."""
    raw = annotations.get(name, "")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RecordError(f"annotation {name}: {exc}") from exc
    if not isinstance(data, dict):
        raise RecordError(f"annotation {name}: not a JSON object")
    return data


def _read_counts(annotations: Mapping[str, str]) -> dict[str, int]:
    name = c.ANNOTATION_GROUP_RESTART_COUNTS
    counts: dict[str, int] = {}
    for group, count in _json_object(annotations, name).items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise RecordError(f"annotation {name}: group {group!r}: must be non-negative")
        counts[str(group)] = count
    return counts


def _read_recreations(annotations: Mapping[str, str]) -> dict[str, Recreation]:
    name = c.ANNOTATION_GROUP_RECREATIONS
    data = _json_object(annotations, name)
    out: dict[str, Recreation] = {}
    for group, entry in data.items():
        recent = entry.get("recent") if isinstance(entry, dict) else None
        last = entry.get("last") if isinstance(entry, dict) else None
        if not isinstance(recent, int) or recent < 0 or not isinstance(last, str):
            raise RecordError(f'annotation {name}: group {group!r}: want {{"recent", "last"}}')
        not_before = entry.get("notBefore") if isinstance(entry, dict) else None
        pending = entry.get("pending") if isinstance(entry, dict) else None
        try:
            out[str(group)] = Recreation(
                recent,
                parse_epoch(last),
                parse_epoch(not_before) if isinstance(not_before, str) else None,
                pending if isinstance(pending, str) and pending else None,
            )
        except RecordError as exc:
            raise RecordError(f"annotation {name}: group {group!r}: {exc}") from exc
    return out


def exhausted(count: int, budget: int | None) -> bool:
    """The group may not be recreated again (upstream: count >= maxGroupRestarts)."""
    return budget is not None and count >= budget


def leader_count(leader: Mapping[str, object]) -> int:
    """The count upstream keeps on a group's leader pod (0 when absent or unreadable)."""
    meta = leader.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    raw = annotations.get(c.ANNOTATION_GROUP_RESTART_COUNT, "") if annotations else ""
    try:
        return max(int(raw), 0) if raw else 0
    except ValueError:
        return 0


def failed_groups(records: GroupRecords, budget: int | None, live: Mapping[str, int]) -> list[str]:
    """Live groups past their budget (`live`: each group's count on its leader pod;
    the higher of that and the LeaderWorkerSet's counts, as upstream reads them).
    Upstream marks a group that found its budget used up with count budget + 1, and
    the LeaderWorkerSet is Failed while any is live."""
    if budget is None:
        return []
    return sorted(g for g, own in live.items() if max(records.count(g), own) > budget)


def claimable(
    records: GroupRecords, live: Collection[str], created: float, budget: int | None = None
) -> str | None:
    """The record a new Hash group created at `created` takes over: the oldest
    recreation (by its time) of a group that has no live leader and was recreated
    before the new group was made; None when there is none. A group past its budget
    was never recreated again: it went by a scale-down or a rollout, and a healthy
    new group must not start out Failed in its place."""
    candidates = [
        (record.last, group)
        for group, record in records.recreations.items()
        if group not in live
        and record.last <= created + _SECOND
        and not (budget is not None and records.count(group) > budget)
    ]
    return min(candidates)[1] if candidates else None
