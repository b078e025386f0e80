"""The local-cluster commands of `lws` load only when they run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from leaderworkerset.cli import LAZY_COMMANDS, main
from tests.toolkit.paths import REPO

SAMPLE = REPO / "config" / "samples" / "worker-template-only.yaml"

# Runs `lws ARGS` in a fresh interpreter and prints the local-cluster modules it loaded.
PROBE = """
import sys
from leaderworkerset.cli import main
from tests.toolkit.paths import REPO
try:
    main(sys.argv[1:], prog_name="lws")
except SystemExit as exit:
    if exit.code:
        raise
print("LOADED", sorted(m for m in sys.modules if m.startswith("lws_localcluster")))
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["controller", "--help"], ["validate", str(SAMPLE)]], ids=" ".join
)
def test_commands_outside_the_local_cluster_do_not_load_it(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED []"


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_the_listed_help_is_the_command_s_own(name: str) -> None:
    command = LAZY_COMMANDS[name].load()
    assert command.name == name
    assert LAZY_COMMANDS[name].short_help == command.get_short_help_str(limit=1000)


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_a_lazy_command_shows_its_own_help(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert f"main {name} [OPTIONS]" in result.output


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_without_the_local_cluster_a_lazy_command_says_what_to_install(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes the import fail as an absent distribution would.
    for module in [m for m in sys.modules if m.startswith("lws_localcluster")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "lws_localcluster", None)
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 2
    assert "pip install ./localcluster" in result.output
    assert "leaderworkerset-localcluster" in result.output
