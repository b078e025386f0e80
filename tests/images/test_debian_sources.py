"""Which Debian mirror the image's base comes from (hack/images/rootfs.py): this
machine's apt sources for bookworm when they have them, in either format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.images.hack_modules import FOLDER, rootfs


def apt_dir(tmp_path: Path, sources_list: str = "", **files: str) -> Path:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(sources_list)
    for name, text in files.items():
        (etc / "sources.list.d" / name.replace("_", ".")).write_text(text)
    return etc


DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
"""


def test_deb822_sources_give_the_bookworm_suites_main_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LWS_DEBIAN_MIRROR", raising=False)
    etc = apt_dir(tmp_path, debian_sources=DEB822)
    assert rootfs.debian_sources(etc) == [
        "deb http://mirror.example/debian bookworm main",
        "deb http://mirror.example/debian bookworm-updates main",
        "deb http://mirror.example/debian-security bookworm-security main",
    ]


def test_one_line_sources_with_options_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LWS_DEBIAN_MIRROR", raising=False)
    etc = apt_dir(
        tmp_path,
        "deb [arch=amd64 signed-by=/k.gpg] http://local/debian bookworm main non-free\n"
        "# deb http://commented/debian bookworm main\n"
        "deb-src http://local/debian bookworm main\n",
        google_list="deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
    )
    assert rootfs.debian_sources(etc) == ["deb http://local/debian bookworm main"]


def test_without_a_bookworm_source_deb_debian_org_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LWS_DEBIAN_MIRROR", raising=False)
    etc = apt_dir(tmp_path, "deb http://archive.ubuntu.com/ubuntu noble main\n")
    assert rootfs.debian_sources(etc) == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]


def test_lws_debian_mirror_replaces_the_machine_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LWS_DEBIAN_MIRROR", "http://cache.local/debian")
    etc = apt_dir(tmp_path, debian_sources=DEB822)
    assert rootfs.debian_sources(etc) == [
        "deb http://cache.local/debian bookworm main",
        "deb http://cache.local/debian bookworm-updates main",
    ]


def test_an_unknown_image_name_is_refused_naming_the_images(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(FOLDER / "build.py"), "--cache", str(tmp_path), "--check", "nginx"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    known = "controller, pause, rendezvous, upstream, nginx-standin, curl-standin"
    assert f"unknown image nginx (images: {known})" in done.stderr
