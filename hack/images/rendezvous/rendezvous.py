"""The start-up of a multi-host job in miniature, for running LeaderWorkerSet groups on
real nodes: the workers find the leader and hold a connection to it, as the ranks of a
distributed training or inference job do before the work starts.

The role comes from the variables the LeaderWorkerSet controller sets on every pod:
LWS_WORKER_INDEX ("0" is the leader), LWS_GROUP_SIZE and LWS_LEADER_ADDRESS.

  leader  listens on RENDEZVOUS_PORT (7000); each worker connects and sends one JSON
          line {"index": N, "hostname": ..., "address": ...}; the leader answers with
          one line, keeps the connection and notices when it closes. GET /ready on
          HTTP_PORT (8080) is 200 while all LWS_GROUP_SIZE-1 workers are connected,
          else 503; the body lists them either way.
  worker  resolves LWS_LEADER_ADDRESS and connects, retrying (backoff up to 2 s) until
          the leader answers; /ready is then 200. When that connection drops it exits
          1, as a job's ranks do when one of them is lost (LWS then restarts the group).

Both serve GET /healthz (200) and exit 0 on SIGTERM. Standard library only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

HELLO_TIMEOUT = 10.0
MAX_BACKOFF = 2.0
FIRST_BACKOFF = 0.1
# A leader on a node that vanished sends no FIN; keepalive notices within ~11 s.
KEEPALIVE = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3}


def log(message: str) -> None:
    print(message, flush=True)


class ConfigError(Exception):
    pass


def env_int(name: str, default: int | None = None, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ConfigError(f"{name} is not set")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} is below {minimum}")
    return value


@dataclass
class Config:
    index: int
    group_size: int
    leader_address: str
    rendezvous_port: int
    http_port: int

    @classmethod
    def from_env(cls) -> Config:
        index = env_int("LWS_WORKER_INDEX")
        size = env_int("LWS_GROUP_SIZE", minimum=1)
        if index >= size:
            raise ConfigError(f"LWS_WORKER_INDEX={index} is not below LWS_GROUP_SIZE={size}")
        leader = os.environ.get("LWS_LEADER_ADDRESS", "")
        if index > 0 and not leader:
            raise ConfigError("LWS_LEADER_ADDRESS is not set (a worker needs it)")
        return cls(
            index=index,
            group_size=size,
            leader_address=leader,
            rendezvous_port=env_int("RENDEZVOUS_PORT", 7000, minimum=1),
            http_port=env_int("HTTP_PORT", 8080, minimum=1),
        )


def keepalive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in KEEPALIVE.items():
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def encode(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True).encode() + b"\n"


# --- HTTP: just enough for kubelet probes and curl (GET, one request per connection)

REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


async def serve_http(port: int, route: dict[str, Any]) -> asyncio.Server:
    """Serve GET on `port`; `route` maps a path to a function giving (status, body)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)
            while (await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)) not in (
                b"\r\n",
                b"\n",
                b"",
            ):
                pass  # headers: nothing here depends on them
            method, _, rest = request.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if path not in route:
                status, body = 404, {"error": f"no such path {path}"}
            elif method not in ("GET", "HEAD"):
                status, body = 405, {"error": f"{method} is not allowed"}
            else:
                status, body = route[path]()
            payload = encode(body)
            head = (
                f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (payload if method != "HEAD" else b""))
            await writer.drain()
        except (OSError, UnicodeDecodeError):  # TimeoutError is an OSError
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host=None, port=port, reuse_address=True)


# --- leader


@dataclass
class Leader:
    config: Config
    # worker index -> what it said in its hello
    connected: dict[int, dict[str, str]] = field(default_factory=dict)
    # worker index -> the writer of its current connection (a reconnecting worker's new
    # connection replaces the old one, whose close then must not remove it)
    current: dict[int, asyncio.StreamWriter] = field(default_factory=dict)

    @property
    def expected(self) -> int:
        return self.config.group_size - 1

    def complete(self) -> bool:
        return len(self.connected) == self.expected

    def ready(self) -> tuple[int, dict[str, Any]]:
        body = {
            "groupSize": self.config.group_size,
            "connected": {str(i): self.connected[i] for i in sorted(self.connected)},
        }
        return (200 if self.complete() else 503), body

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            keepalive(sock)
        peer = writer.get_extra_info("peername")
        try:
            hello = await self.read_hello(reader)
        except (OSError, ValueError) as err:
            log(f"leader: refused a connection from {peer}: {err}")
            writer.write(encode({"error": str(err)}))
            writer.close()
            return
        index = hello["index"]
        self.join(index, hello, writer)
        try:
            writer.write(encode({"accepted": index, "groupSize": self.config.group_size}))
            await writer.drain()
            while await reader.read(4096):
                pass  # a worker sends nothing after its hello; EOF is its leaving
        except OSError:
            pass
        finally:
            writer.close()
            self.leave(index, writer)

    async def read_hello(self, reader: asyncio.StreamReader) -> dict[str, Any]:
        line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)
        if not line:
            raise ValueError("closed before its hello")
        hello = json.loads(line)
        index = hello.get("index") if isinstance(hello, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise ValueError(f"hello without an integer index: {line!r}")
        if not 1 <= index <= self.expected:
            raise ValueError(
                f"index {index} is not a worker of a group of {self.config.group_size}"
            )
        return {"index": index, "hostname": str(hello.get("hostname", "")),
                "address": str(hello.get("address", ""))}  # fmt: skip

    def join(self, index: int, hello: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        old = self.current.get(index)
        if old is not None:
            old.close()  # the worker restarted; its old connection is stale
        self.current[index] = writer
        self.connected[index] = {"hostname": hello["hostname"], "address": hello["address"]}
        log(
            f"leader: worker {index} joined ({hello['hostname']} {hello['address']}); "
            f"{len(self.connected)}/{self.expected} connected"
        )
        if self.complete():
            self.announce()

    def leave(self, index: int, writer: asyncio.StreamWriter) -> None:
        if self.current.get(index) is not writer:
            return
        del self.current[index]
        info = self.connected.pop(index)
        log(
            f"leader: worker {index} left ({info['hostname']} {info['address']}); "
            f"{len(self.connected)}/{self.expected} connected"
        )

    def announce(self) -> None:
        members = ", ".join(
            f"{i}={self.connected[i]['hostname']}@{self.connected[i]['address']}"
            for i in sorted(self.connected)
        )
        log(f"rendezvous complete: group of {self.config.group_size}, workers {members or '-'}")

    async def run(self, stop: asyncio.Event) -> int:
        port = self.config.rendezvous_port
        server = await asyncio.start_server(self.handle, host=None, port=port, reuse_address=True)
        http = await serve_http(self.config.http_port, {"/ready": self.ready, "/healthz": healthz})
        log(f"leader: group of {self.config.group_size}, rendezvous on :{port}, "
            f"http on :{self.config.http_port}")  # fmt: skip
        if self.complete():
            self.announce()
        await stop.wait()
        # Not `async with`: closing the servers leaves the workers' connections open,
        # and the process exits now rather than waiting for them.
        server.close()
        http.close()
        for writer in self.current.values():
            writer.close()
        return 0


def healthz() -> tuple[int, dict[str, Any]]:
    return 200, {"status": "ok"}


# --- worker


@dataclass
class Worker:
    config: Config
    connected: bool = False

    def ready(self) -> tuple[int, dict[str, Any]]:
        body = {"index": self.config.index, "leader": self.config.leader_address,
                "connected": self.connected}  # fmt: skip
        return (200 if self.connected else 503), body

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Retry until the leader resolves, accepts the connection and answers the
        hello; every failure is logged, the pause doubles up to MAX_BACKOFF."""
        host, port = self.config.leader_address, self.config.rendezvous_port
        backoff = FIRST_BACKOFF
        while True:
            try:
                return await self.attempt(host, port)
            except socket.gaierror as err:
                why = f"cannot resolve {host}: {err.strerror}"
            except (OSError, ValueError) as err:
                why = f"cannot join {host}:{port}: {err or type(err).__name__}"
            log(f"worker {self.config.index}: {why}; retrying in {backoff:.1f}s")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def attempt(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        last: OSError = OSError(f"no address for {host}")
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, address), HELLO_TIMEOUT)
            except TimeoutError:
                sock.close()
                last = OSError(f"timed out connecting to {address}")
                continue
            except OSError as err:
                sock.close()
                last = err
                continue
            keepalive(sock)
            reader, writer = await asyncio.open_connection(sock=sock)
            try:
                await self.hello(reader, writer, sock.getsockname()[0])
            except BaseException:
                writer.close()
                raise
            return reader, writer
        raise last

    async def hello(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str
    ) -> None:
        hello = {"index": self.config.index, "hostname": socket.gethostname(), "address": address}
        writer.write(encode(hello))
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)
        if not answer:
            raise ValueError("the leader closed the connection before answering")
        reply = json.loads(answer)
        if "accepted" not in reply:
            raise ValueError(f"the leader refused: {reply.get('error', reply)}")

    async def run(self, stop: asyncio.Event) -> int:
        http = await serve_http(self.config.http_port, {"/ready": self.ready, "/healthz": healthz})
        log(f"worker {self.config.index}: leader {self.config.leader_address}:"
            f"{self.config.rendezvous_port}, http on :{self.config.http_port}")  # fmt: skip
        try:
            return await self.join_and_hold(stop)
        finally:
            http.close()

    async def join_and_hold(self, stop: asyncio.Event) -> int:
        """0 when stopped by a signal, 1 when the connection to the leader is lost."""
        joining = asyncio.ensure_future(self.connect())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({joining, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            joining.cancel()
            return 0
        reader, writer = joining.result()
        self.connected = True
        log(f"worker {self.config.index}: joined the leader")
        lost = asyncio.ensure_future(self.hold(reader))
        await asyncio.wait({lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
        writer.close()
        if stop.is_set():
            lost.cancel()
            return 0
        self.connected = False
        log(f"worker {self.config.index}: lost the connection to the leader; exiting")
        return 1

    async def hold(self, reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(4096):
                pass
        except OSError:
            pass


async def main_async(config: Config) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    role: Leader | Worker = Leader(config) if config.index == 0 else Worker(config)
    code = await role.run(stop)
    if stop.is_set():
        log(f"{'leader' if isinstance(role, Leader) else f'worker {config.index}'}: stopped")
    return code


def main() -> int:
    try:
        config = Config.from_env()
    except ConfigError as err:
        print(f"rendezvous: {err}", file=sys.stderr, flush=True)
        return 2
    return asyncio.run(main_async(config))


if __name__ == "__main__":
    sys.exit(main())
