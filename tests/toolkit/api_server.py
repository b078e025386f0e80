"""A tiny HTTP(S) server on 127.0.0.1 standing in for the API server: each test gives
the handler, and the server keeps what it was asked and over how many connections."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Served:
    url: str
    requests: list[web.Request] = field(default_factory=list)
    transports: set[object] = field(default_factory=set)
    # Set when the test ends, so a handler that waits on it never outlives the server.
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def connections(self) -> int:
        return len(self.transports)

    def header(self, name: str) -> list[str | None]:
        return [request.headers.get(name) for request in self.requests]


@asynccontextmanager
async def api_server(
    handler: Handler, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[Served]:
    served = Served(url="")

    async def handle(request: web.Request) -> web.StreamResponse:
        served.requests.append(request)
        served.transports.add(request.transport)
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    served.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    try:
        yield served
    finally:
        served.done.set()
        await runner.cleanup()


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "status": "Failure", "code": code, "reason": reason}
    return web.json_response({**body, "message": message}, status=code)
