"""api.objects: the one reading of the revision key and the one writing of API times."""

from __future__ import annotations

import datetime

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import (
    format_micro_time,
    format_time,
    revision_key_of,
    timestamp_of,
)


def test_revision_key_is_the_label_or_empty() -> None:
    labelled = {"metadata": {"labels": {c.LABEL_TEMPLATE_REVISION_HASH: "abc"}}}
    assert revision_key_of(labelled) == "abc"
    assert revision_key_of({"metadata": {"labels": {c.LABEL_TEMPLATE_REVISION_HASH: ""}}}) == ""
    assert revision_key_of({"metadata": {}}) == ""
    assert revision_key_of(None) == ""


def test_times_are_written_in_utc_at_their_precision() -> None:
    assert format_time(1.75) == "1970-01-01T00:00:01Z"
    assert format_micro_time(1.75) == "1970-01-01T00:00:01.750000Z"
    east = datetime.datetime(
        2024, 5, 1, 12, 30, 5, 250, datetime.timezone(datetime.timedelta(hours=2))
    )
    assert format_time(east) == "2024-05-01T10:30:05Z"
    assert format_micro_time(east) == "2024-05-01T10:30:05.000250Z"


def test_now_is_read_back_as_now() -> None:
    before = datetime.datetime.now(datetime.UTC).timestamp()
    written = timestamp_of(format_micro_time())
    assert written is not None and before - 1 <= written <= before + 5
    assert timestamp_of(format_time(before)) == int(before)
