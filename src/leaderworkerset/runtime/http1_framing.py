"""HTTP/1.1 request framing for the webhook server: a request's head, then its body by
`Content-Length` or chunked, read from the connection's buffer as bytes arrive.

Framing is where one request's bytes can be taken for another's (request smuggling),
so anything ambiguous is refused rather than guessed: both `Content-Length` and
`Transfer-Encoding`, two different lengths, a length or chunk size that is not plain
digits, a bare CR or LF, a header line folded onto the one before. Every part a
client controls is bounded: the head and the trailer at `MAX_HEAD`, a chunk-size line
at `MAX_CHUNK_LINE`, the body at the server's limit and its chunked form on the wire
at that limit plus `MAX_HEAD`.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_CHUNK_LINE = 1024  # a chunk size with its extensions, which are not read

_HEX_DIGITS = b"0123456789abcdefABCDEF"


class HTTPError(Exception):
    """A request answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class RequestHead:
    method: str
    path: str
    content_type: str
    keep_alive: bool
    http10: bool
    expect_continue: bool
    length: int  # the Content-Length; 0 when chunked or absent
    chunked: bool
    size: int  # bytes of the head, its blank line included


def parse_head(buffer: bytearray) -> RequestHead | None:
    """The head at the buffer's start, or None while it is incomplete."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise HTTPError(431, "request head too large")
        return None
    raw = bytes(buffer[:end])
    crlf = raw.count(b"\r\n")
    if raw.count(b"\r") != crlf or raw.count(b"\n") != crlf:
        raise HTTPError(400, "bare CR or LF in the request head")
    lines = raw.split(b"\r\n")
    try:
        method, target, version = lines[0].split(b" ")
    except ValueError:
        raise HTTPError(400, "malformed request line") from None
    if version == b"HTTP/1.1":
        http10 = False
    elif version == b"HTTP/1.0":
        http10 = True
    elif version.startswith(b"HTTP/"):
        raise HTTPError(505, "only HTTP/1.1 is served")
    else:
        raise HTTPError(400, "malformed request line")
    head = RequestHead(
        method=method.decode("latin-1"),
        path=target.split(b"?", 1)[0].decode("latin-1"),
        content_type="",
        keep_alive=not http10,
        http10=http10,
        expect_continue=False,
        length=0,
        chunked=False,
        size=end + 4,
    )
    _read_fields(head, lines[1:])
    return head


def _read_fields(head: RequestHead, lines: list[bytes]) -> None:
    """The header fields a review needs, into `head`; the others are skipped."""
    length: int | None = None
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise HTTPError(400, "malformed header line")
        key = name.lower()
        if key == b"content-length":
            digits = value.strip()
            if not digits.isdigit() or len(digits) > 18:
                raise HTTPError(400, "invalid Content-Length")
            if length is not None and int(digits) != length:
                raise HTTPError(400, "conflicting Content-Length")
            length = int(digits)
        elif key == b"transfer-encoding":
            if [c.strip().lower() for c in value.split(b",")] != [b"chunked"]:
                raise HTTPError(400, "unsupported Transfer-Encoding")
            head.chunked = True
        elif key == b"content-type":
            head.content_type = value.split(b";", 1)[0].strip().lower().decode("latin-1")
        elif key == b"connection":
            tokens = {t.strip().lower() for t in value.split(b",")}
            if b"close" in tokens:
                head.keep_alive = False
            elif b"keep-alive" in tokens:
                head.keep_alive = True
        elif key == b"expect" and value.strip().lower() == b"100-continue":
            head.expect_continue = True
    if head.chunked and length is not None:
        raise HTTPError(400, "both Content-Length and Transfer-Encoding")
    head.length = length or 0


class Body:
    """One request's body, read from the buffer after its head. It keeps its place
    between reads, so a chunked body's bytes are looked at once however they arrive."""

    def __init__(self, head: RequestHead, max_body: int) -> None:
        self.head = head
        self.max_body = max_body
        if not head.chunked and head.length > max_body:
            raise HTTPError(413, f"request body over {max_body} bytes")
        self.pos = head.size  # the next unread byte of the chunked form
        self.parts: list[bytes] = []
        self.total = 0
        self.trailer_start: int | None = None

    def read(self, buffer: bytearray) -> tuple[bytes, int] | None:
        """(the body, bytes of the buffer the request took), or None while incomplete."""
        start = self.head.size
        if not self.head.chunked:
            end = start + self.head.length
            return (bytes(buffer[start:end]), end) if len(buffer) >= end else None
        while self.trailer_start is None:
            if self.pos - start > self.max_body + MAX_HEAD:
                raise HTTPError(413, f"request body over {self.max_body} bytes")
            eol = buffer.find(b"\r\n", self.pos, self.pos + MAX_CHUNK_LINE + 2)
            if eol < 0:
                if len(buffer) - self.pos > MAX_CHUNK_LINE:
                    raise HTTPError(400, "chunk-size line too long")
                return None
            size_field = bytes(buffer[self.pos : eol]).split(b";", 1)[0].strip()
            # int() would also take "0x", "+" and "_": only hex digits are a size.
            if not size_field or size_field.strip(_HEX_DIGITS) or len(size_field) > 15:
                raise HTTPError(400, "malformed chunk size")
            size = int(size_field, 16)
            if size == 0:
                self.pos = self.trailer_start = eol + 2
                break
            if self.total + size > self.max_body:
                raise HTTPError(413, f"request body over {self.max_body} bytes")
            data_end = eol + 2 + size
            if len(buffer) < data_end + 2:
                return None  # the size line is read again with its data: one line
            if buffer[data_end : data_end + 2] != b"\r\n":
                raise HTTPError(400, "malformed chunk")
            self.parts.append(bytes(buffer[eol + 2 : data_end]))
            self.total += size
            self.pos = data_end + 2
        # Trailer fields, if any, end with an empty line; they are not read.
        while True:
            eol = buffer.find(b"\r\n", self.pos)
            if eol < 0 or eol - self.trailer_start > MAX_HEAD:
                if len(buffer) - self.trailer_start > MAX_HEAD:
                    raise HTTPError(431, "trailer too large")
                return None
            if eol == self.pos:
                return b"".join(self.parts), eol + 2
            self.pos = eol + 2
