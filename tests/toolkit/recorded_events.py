"""The one event recorder of the unit tests: an :class:`EventRecorder` (so a reconciler
takes it where it takes the real one, no ``cast``) that keeps what it is told instead of
writing Events to an API server, with helpers to query what it kept by reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaderworkerset.runtime.events import EventRecorder, object_reference
from tests.toolkit.fake_client import FakeApiClient

JSON = dict[str, Any]


@dataclass(frozen=True)
class Told:
    """One event as the code recorded it; `regarding` and `related` as references
    (apiVersion, kind, namespace, name, uid), as the real recorder writes them."""

    regarding: JSON | None
    type: str
    reason: str
    action: str
    note: str
    related: JSON | None

    @property
    def about(self) -> tuple[str, str] | None:
        """(kind, name) of the object the event is about."""
        if self.regarding is None:
            return None
        return (self.regarding.get("kind", ""), self.regarding.get("name", ""))

    @property
    def subject(self) -> str:
        """ "Kind/name" of the object the event is about ("" when about nothing)."""
        return "/".join(self.about or ())

    @property
    def related_name(self) -> str | None:
        return None if self.related is None else self.related.get("name")


class RecordedEvents(EventRecorder):
    """Keeps every event in `told`, in order; never queues or writes one."""

    def __init__(self) -> None:
        super().__init__(FakeApiClient(), "test")
        self.told: list[Told] = []

    def event(
        self,
        regarding: JSON,
        type_: str,
        reason: str,
        action: str,
        note: str,
        related: JSON | None = None,
    ) -> None:
        self.told.append(
            Told(_reference(regarding), type_, reason, action, note, _reference(related))
        )

    @property
    def reasons(self) -> list[str]:
        return [told.reason for told in self.told]

    @property
    def said(self) -> list[tuple[str, str, str]]:
        """(type, reason, note) of every event, in order."""
        return [(told.type, told.reason, told.note) for told in self.told]

    @property
    def abouts(self) -> list[tuple[str, str | None]]:
        """("Kind/name" regarded, name of the related object) of every event, in order."""
        return [(told.subject, told.related_name) for told in self.told]

    @property
    def notes(self) -> list[str]:
        return [told.note for told in self.told]

    def of(self, reason: str) -> list[Told]:
        """The events told with this reason, in order."""
        return [told for told in self.told if told.reason == reason]

    def of_type(self, type_: str) -> list[Told]:
        """The events told with this type (Normal, Warning), in order."""
        return [told for told in self.told if told.type == type_]

    def notes_of(self, reason: str) -> list[str]:
        return [told.note for told in self.of(reason)]


def _reference(obj: JSON | None) -> JSON | None:
    if obj is None or "metadata" not in obj:
        return obj
    return object_reference(obj)
