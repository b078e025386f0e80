"""Upstream's files at the version the migration tests pin, fetched at run time.

The module zip of sigs.k8s.io/lws comes from the Go module proxy into the cache
(~/.cache/leaderworkerset, or $LWS_CACHE_DIR), and is checked against the `h1:` hash
that hack/upstream-lws/go.sum records before anything in it is read, so a test never
compares with a file that is not upstream's. Nothing of it enters the repository.
A machine without network skips the tests that need it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import urllib.request
import zipfile
from functools import cache
from pathlib import Path

import pytest

from tests.toolkit.paths import REPO

MODULE = "sigs.k8s.io/lws"
PROXY = "https://proxy.golang.org"
GO_SUM = REPO / "hack" / "upstream-lws" / "go.sum"


def pinned_version() -> str:
    (version,) = re.findall(
        rf"^\s*{re.escape(MODULE)} (v\S+)(?:\s*//.*)?$",
        (REPO / "hack" / "upstream-lws" / "go.mod").read_text(),
        re.MULTILINE,
    )
    return version


def _expected_hash(version: str) -> str:
    (digest,) = re.findall(
        rf"^{re.escape(MODULE)} {re.escape(version)} (h1:\S+)$", GO_SUM.read_text(), re.MULTILINE
    )
    return digest


def dirhash(archive: zipfile.ZipFile) -> str:
    """Go's dirhash Hash1 of a module zip: SHA-256 over "<sha256>  <name>" lines."""
    lines = "".join(
        f"{hashlib.sha256(archive.read(name)).hexdigest()}  {name}\n"
        for name in sorted(archive.namelist())
    )
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


@cache
def module_zip(version: str) -> Path:
    cache_dir = Path(os.environ.get("LWS_CACHE_DIR", Path.home() / ".cache" / "leaderworkerset"))
    path = cache_dir / "upstream" / f"lws-{version}.zip"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        url = f"{PROXY}/{MODULE}/@v/{version}.zip"
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                partial.write_bytes(answer.read())
        except OSError as exc:
            pytest.skip(f"cannot fetch {url}: {exc}")
        partial.rename(path)
    with zipfile.ZipFile(path) as archive:
        found, expected = dirhash(archive), _expected_hash(version)
    if found != expected:
        path.unlink()
        raise AssertionError(f"{path} hashes to {found}, go.sum says {expected}: deleted")
    return path


def upstream_file(relative: str, version: str | None = None) -> str:
    """The text of one file of upstream's module (path relative to the module root)."""
    version = version or pinned_version()
    with zipfile.ZipFile(module_zip(version)) as archive:
        return archive.read(f"{MODULE}@{version}/{relative}").decode()
