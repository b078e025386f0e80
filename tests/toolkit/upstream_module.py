"""Upstream's module sigs.k8s.io/lws, at the version hack/upstream-lws/go.mod pins, as
the Go module proxy serves it: a zip fetched at run time (never kept in the repo),
cached under the build cache, and checked against the pinned go.sum hash.

Tests read upstream's install manifests (charts/lws, config/) from it to compare ours
with them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.toolkit.paths import REPO

MODULE = "sigs.k8s.io/lws"
PINS = REPO / "hack" / "upstream-lws"
PROXY = os.environ.get("LWS_GO_PROXY", "https://proxy.golang.org").rstrip("/")
CACHE_ROOT = Path(os.environ.get("LWS_CACHE_DIR") or Path.home() / ".cache" / "leaderworkerset")


class ProxyUnreachableError(RuntimeError):
    """The module proxy could not be reached at all (no network): a reason to skip."""


def pinned_version() -> str:
    (version,) = re.findall(
        rf"^\s*{re.escape(MODULE)} (v\S+)", (PINS / "go.mod").read_text(), re.MULTILINE
    )
    return version


def _pinned_hash(version: str) -> str:
    (digest,) = re.findall(
        rf"^{re.escape(MODULE)} {re.escape(version)} (h1:\S+)$",
        (PINS / "go.sum").read_text(),
        re.MULTILINE,
    )
    return digest


def zip_hash(path: Path) -> str:
    """Go's `h1:` hash of a module zip (golang.org/x/mod/sumdb/dirhash.Hash1): SHA-256
    over the sorted `<sha256 of file>  <name>` lines."""
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if not n.endswith("/"))
        lines = "".join(f"{hashlib.sha256(archive.read(n)).hexdigest()}  {n}\n" for n in names)
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def module_zip(version: str | None = None) -> Path:
    """The module zip, downloaded once; ProxyUnreachableError without a network, an
    AssertionError when the proxy answers with an error or a zip go.sum does not pin."""
    version = version or pinned_version()
    path = CACHE_ROOT / f"upstream-lws-{version}.zip"
    want = _pinned_hash(version)
    if path.is_file() and zip_hash(path) == want:
        return path
    url = f"{PROXY}/{MODULE}/@v/{version}.zip"
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            data = answer.read()
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url}: the proxy answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise ProxyUnreachableError(f"{url} is unreachable: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    # Per process: two suites (make unit-pythons runs two) may fetch it at once.
    partial = path.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(data)
    got = zip_hash(partial)
    if got != want:
        partial.unlink()
        raise AssertionError(f"{url} has hash {got}, go.sum pins {want}")
    partial.replace(path)
    return path


def extract(folder: str, dest: Path, version: str | None = None) -> Path:
    """`folder` of the module (e.g. `charts/lws`) copied under `dest`; its new path."""
    version = version or pinned_version()
    prefix = f"{MODULE}@{version}/"
    with zipfile.ZipFile(module_zip(version)) as archive:
        for name in archive.namelist():
            relative = name.removeprefix(prefix)
            if relative.startswith(folder.rstrip("/") + "/") and not name.endswith("/"):
                target = dest / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    return dest / folder


def upstream_file(relative: str, version: str | None = None) -> str:
    """The text of one file of upstream's module (path relative to the module root); the
    test is skipped when the proxy cannot be reached."""
    version = version or pinned_version()
    try:
        path = module_zip(version)
    except ProxyUnreachableError as exc:
        pytest.skip(str(exc))
    with zipfile.ZipFile(path) as archive:
        return archive.read(f"{MODULE}@{version}/{relative}").decode()
