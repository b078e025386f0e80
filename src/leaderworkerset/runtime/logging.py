"""Structured logging on the standard library, in the shape zap gives Go controllers.

One JSON object a line (ts, level, logger, msg, then the record's extra fields), so log
pipelines built for the upstream manager parse ours unchanged. `--zap-log-level=N`
enables logr's V(N) verbosity: V(n) logs at stdlib level ``INFO - n``.
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
import traceback
from typing import IO, Any

import orjson

from leaderworkerset.api.objects import format_micro_time, format_time

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)

LEVEL_NAMES = ("debug", "info", "warn", "error", "dpanic", "panic", "fatal")
TIME_ENCODINGS = ("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
ENCODERS = ("json", "console")
_HANDLER_NAME = "leaderworkerset-runtime"


def v(level: int) -> int:
    """The stdlib level of logr's V(level): `log.log(v(2), ...)` shows with --zap-log-level=2."""
    return logging.INFO - level


def parse_level(value: str | int) -> int:
    """A `--zap-log-level` value (a level name or a verbosity integer) as a stdlib level."""
    if isinstance(value, int):
        return v(value)
    text = value.strip().lower()
    by_name = {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "warn": logging.WARNING,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "dpanic": logging.CRITICAL,
        "panic": logging.CRITICAL,
        "fatal": logging.CRITICAL,
    }
    if text in by_name:
        return by_name[text]
    try:
        verbosity = int(text)
    except ValueError:
        raise ValueError(
            f'invalid log level "{value}": must be one of {", ".join(LEVEL_NAMES)} '
            "or a non-negative integer"
        ) from None
    if verbosity < 0:
        raise ValueError(f'invalid log level "{value}": verbosity must not be negative')
    return v(verbosity)


def level_name(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "panic"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warn"
    if levelno >= logging.INFO:
        return "info"
    return "debug"


def _timestamp(created: float, encoding: str) -> Any:
    if encoding == "epoch":
        return created
    if encoding == "millis":
        return created * 1000
    if encoding == "nano":
        return int(created * 1_000_000_000)
    stamp = datetime.datetime.fromtimestamp(created, datetime.UTC)
    if encoding == "rfc3339":
        return format_time(stamp)
    if encoding == "rfc3339nano":
        return format_micro_time(stamp)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: val for k, val in vars(record).items() if k not in _STANDARD_ATTRS}


class JsonFormatter(logging.Formatter):
    def __init__(self, time_encoding: str = "iso8601", stacktrace_level: int = logging.ERROR):
        super().__init__()
        self.time_encoding = time_encoding
        self.stacktrace_level = stacktrace_level

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record.created, self.time_encoding),
            "level": level_name(record.levelno),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.levelno < logging.INFO:
            entry["v"] = logging.INFO - record.levelno if record.levelno > logging.DEBUG else 1
        entry.update(extra_fields(record))
        if record.exc_info and record.exc_info[1] is not None:
            entry["error"] = str(record.exc_info[1]) or type(record.exc_info[1]).__name__
            if record.levelno >= self.stacktrace_level:
                entry["stacktrace"] = "".join(traceback.format_exception(*record.exc_info))
        elif record.stack_info:
            entry["stacktrace"] = record.stack_info
        # default=str: an extra value that is not JSON (a Path, an exception) still logs.
        return orjson.dumps(entry, default=str).decode()


class ConsoleFormatter(logging.Formatter):
    """zap's development encoder: tab-separated, extras as a JSON tail."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = _timestamp(record.created, "iso8601")
        parts = [str(stamp), level_name(record.levelno).upper(), record.name, record.getMessage()]
        extras = extra_fields(record)
        if extras:
            parts.append(orjson.dumps(extras, default=str).decode())
        line = "\t".join(parts)
        if record.exc_info:
            line += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return line


def configure(
    level: str | int = "info",
    *,
    encoder: str = "json",
    time_encoding: str = "iso8601",
    stacktrace_level: str = "error",
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Route the root logger to one handler with the chosen encoder; return the handler."""
    if encoder not in ENCODERS:
        raise ValueError(f'invalid encoder "{encoder}": must be one of {", ".join(ENCODERS)}')
    if time_encoding not in TIME_ENCODINGS:
        raise ValueError(
            f'invalid time encoding "{time_encoding}": must be one of {", ".join(TIME_ENCODINGS)}'
        )
    handler = logging.StreamHandler(stream or sys.stderr)
    formatter: logging.Formatter = (
        JsonFormatter(time_encoding, parse_level(stacktrace_level))
        if encoder == "json"
        else ConsoleFormatter()
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    # Only our own earlier handler goes: others (a test runner's) keep working.
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(parse_level(level))
    # Per-request lines of these libraries would drown the controller's own logs.
    for noisy in ("httpx", "httpx2", "httpcore", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return handler
