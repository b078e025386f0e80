"""teardown in the manager Configuration (our addition): a group restart is torn down in
parallel by default, a LeaderWorkerSet deletion left to the garbage collector (as
upstream); an unknown mode is an error naming the field; what it sets is what the
controllers get."""

from __future__ import annotations

from pathlib import Path

import pytest

from leaderworkerset.api.config.codec import ConfigError
from leaderworkerset.controller_command import Settings, load_configuration
from leaderworkerset.group.options import TeardownModes

HEADER = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


def settings(tmp_path: Path, body: str = "") -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + body)
    return Settings(configuration=load_configuration(path), namespace="lws-system")


def test_defaults(tmp_path: Path) -> None:
    loaded = settings(tmp_path)
    assert loaded.teardown == TeardownModes(group_restart=True, lws_deletion=False)
    assert loaded.configuration.to_dict()["teardown"] == {
        "groupRestart": "Parallel",
        "leaderWorkerSetDeletion": "GarbageCollector",
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("teardown: {groupRestart: GarbageCollector}\n", (False, False)),
        ("teardown: {leaderWorkerSetDeletion: Parallel}\n", (True, True)),
        (
            "teardown: {groupRestart: GarbageCollector, leaderWorkerSetDeletion: Parallel}\n",
            (False, True),
        ),
    ],
)
def test_what_is_set_is_what_the_controllers_get(
    tmp_path: Path, body: str, expected: tuple[bool, bool]
) -> None:
    modes = settings(tmp_path, body).teardown
    assert (modes.group_restart, modes.lws_deletion) == expected


@pytest.mark.parametrize("member", ["groupRestart", "leaderWorkerSetDeletion"])
def test_an_unknown_mode_names_the_field(tmp_path: Path, member: str) -> None:
    with pytest.raises(ConfigError, match=f'teardown.{member}: Unsupported value: "parallel"'):
        settings(tmp_path, f"teardown: {{{member}: parallel}}\n")
