"""`lws validate` and the API server (with our webhooks) give the same verdict and the
same message on every bad manifest of tests/data/bad-leaderworkersets: wrong types,
unknown members, bad enums, out-of-range numbers, names too long. A wrongly typed value
is refused, never stored as a default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.cli import main
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.toolkit.paths import REPO

pytestmark = pytest.mark.asyncio(loop_scope="session")

BAD = REPO / "tests" / "data" / "bad-leaderworkersets"
STRICT = {"fieldValidation": "Strict"}


def lws_validate(path: Path) -> tuple[int, list[str]]:
    """Exit code and the lines that carry a verdict: the strict decoding error, or each
    field error."""
    result = CliRunner().invoke(main, ["validate", str(path)])
    lines = [line.strip() for line in result.stderr.splitlines()]
    verdicts = [line.removeprefix("Error: ") for line in lines if line.startswith("Error: ")]
    verdicts += [line.removeprefix("* ") for line in lines if line.startswith("* ")]
    return result.exit_code, verdicts


async def server_verdict(api: ApiClient, body: dict[str, Any], namespace: str) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await api.request(
            "POST",
            LEADERWORKERSETS.path(namespace),
            params={**STRICT, "dryRun": "All"},
            body=body,
        )
    return refused.value


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
async def test_lws_validate_and_the_api_server_agree(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, path: Path
) -> None:
    code, verdicts = lws_validate(path)
    assert code == 1 and verdicts, path
    body = yaml.safe_load(path.read_text())  # noqa: ASYNC240 (a small local file)
    error = await server_verdict(nodesim_api, body, namespace)
    assert error.status in (400, 422), error
    for verdict in verdicts:
        assert verdict in error.message, (verdict, error.message)


async def test_a_wrongly_typed_value_is_refused_and_nothing_is_stored(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    body = yaml.safe_load((BAD / "type-replicas-string.yaml").read_text())
    with pytest.raises(ApiError) as refused:
        await nodesim_api.request(
            "POST", LEADERWORKERSETS.path(namespace), params=STRICT, body=body
        )
    assert refused.value.status == 422
    assert 'spec.replicas in body must be of type integer: "string"' in refused.value.message
    assert (await nodesim_api.list(LEADERWORKERSETS, namespace))["items"] == []
