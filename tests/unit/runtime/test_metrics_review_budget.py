"""The metrics port's token reviews of tokens it has not seen share a budget: anyone
who reaches the port can send a new token every time, and each review is a call on the
manager's own client. Past the budget an unknown token is answered 429 with no review;
a token already reviewed is served as before."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import make_mocked_request

from leaderworkerset.runtime.client import TokenBucket
from leaderworkerset.runtime.health import DelegatedAuth


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _ApiServer:
    """Authenticates tokens that start with "good" and allows them everything."""

    def __init__(self) -> None:
        self.token_reviews = 0

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        if path.endswith("/tokenreviews"):
            self.token_reviews += 1
            good = body["spec"]["token"].startswith("good")
            return {"status": {"authenticated": good, "user": {"username": "scraper"}}}
        return {"status": {"allowed": True}}


async def answer(auth: DelegatedAuth, token: str) -> int:
    request = make_mocked_request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    response = await auth.check(request)
    return 200 if response is None else response.status


async def test_unknown_tokens_past_the_budget_get_429_and_no_review() -> None:
    clock, api = _Clock(), _ApiServer()
    auth = DelegatedAuth(api, TokenBucket(qps=1.0, burst=3, clock=clock))  # type: ignore[arg-type]
    assert await answer(auth, "good-scraper") == 200
    assert [await answer(auth, f"random-{i}") for i in range(2)] == [401, 401]
    assert api.token_reviews == 3
    assert await answer(auth, "random-2") == 429
    assert await answer(auth, "good-other") == 429
    assert api.token_reviews == 3
    # The scraper whose token was reviewed is not held up by the flood.
    assert await answer(auth, "good-scraper") == 200
    clock.now += 1.0
    assert await answer(auth, "good-other") == 200
    assert api.token_reviews == 4


async def test_the_default_budget_lets_a_burst_of_scrapers_through() -> None:
    api = _ApiServer()
    budget = TokenBucket(DelegatedAuth.REVIEWS_PER_SECOND, DelegatedAuth.REVIEWS_BURST, _Clock())
    auth = DelegatedAuth(api, budget)  # type: ignore[arg-type]
    tokens = [f"good-{i}" for i in range(DelegatedAuth.REVIEWS_BURST)]
    assert [await answer(auth, t) for t in tokens] == [200] * len(tokens)
    assert await answer(auth, "good-one-more") == 429
