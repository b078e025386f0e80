"""Stand-in for docker.io/nginxinc/nginx-unprivileged:1.27, the image of every pod in
upstream LeaderWorkerSet's e2e suite, which only needs a container that stays up as
non-root, listens on 8080 and stops when its pod is deleted. It is not nginx: every GET
is answered 200 with a line saying what it is.

It exits 0 on SIGTERM. As PID 1 of its container it must handle the signal itself: the
kernel drops a signal PID 1 has no handler for, and the kubelet would wait out the
grace period (30 s) on every pod the suite deletes or rolls.

Standard library only; HTTP_PORT overrides the port.
"""

from __future__ import annotations

import http.server
import os
import signal
import sys
from types import FrameType

BODY = b"stand-in for nginx-unprivileged (leaderworkerset e2e), not nginx\n"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: object) -> None:
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()


def stop(signum: int, frame: FrameType | None) -> None:
    print("stand-in: stopped", flush=True)
    sys.exit(0)


def main() -> None:
    port = int(os.environ.get("HTTP_PORT") or 8080)
    signal.signal(signal.SIGTERM, stop)
    server = http.server.ThreadingHTTPServer(("", port), Handler)
    print(f"stand-in: serving HTTP on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
