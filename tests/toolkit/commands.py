"""Running the `lws controller` command in-process, its parsed settings captured
instead of a manager started."""

from __future__ import annotations

from click.testing import CliRunner

from leaderworkerset.controller_command import Settings, controller_command


def run_command(args: list[str], env: dict[str, str] | None = None) -> tuple[Settings, str]:
    seen: list[Settings] = []
    command = controller_command(seen.append, version="v1.2.3", git_commit="abcdef0123")
    result = CliRunner().invoke(command, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(seen) == 1, result.output
    return seen[0], result.output
