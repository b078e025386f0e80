"""hack/images/oci.py: layers and OCI archives that are the same bytes for the same
input, and that say what containerd's import and the OCI layout need."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.images.hack_modules import oci


def make_tree(root: Path) -> None:
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tool").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "usr/bin/tool").chmod(0o755)
    os.link(root / "usr/bin/tool", root / "usr/bin/tool-again")
    (root / "usr/bin/alias").symlink_to("tool")
    (root / "etc").mkdir()
    (root / "etc/conf").write_text("a=1\n")
    (root / "dev").mkdir()
    (root / "dev/junk").write_text("left out")


def layer_members(store: Any, layer: Any) -> list[tarfile.TarInfo]:
    with tarfile.open(store.path(layer.blob), "r:gz") as tar:
        return tar.getmembers()


def test_a_tree_gives_the_same_layer_bytes_twice(tmp_path: Path) -> None:
    make_tree(tmp_path / "a")
    first = oci.BlobStore(tmp_path / "s1").put_layer(
        lambda t: oci.add_tree(t, tmp_path / "a", empty=frozenset({"dev"}))
    )
    os.utime(tmp_path / "a/etc/conf", (1, 1))  # mtimes must not matter
    second = oci.BlobStore(tmp_path / "s2").put_layer(
        lambda t: oci.add_tree(t, tmp_path / "a", empty=frozenset({"dev"}))
    )
    assert first == second
    assert first.content_bytes == len(b"#!/bin/sh\necho hi\n") + len(b"a=1\n")


def test_layer_entries_are_sorted_dated_at_the_epoch_and_keep_modes_and_links(
    tmp_path: Path,
) -> None:
    make_tree(tmp_path / "a")
    store = oci.BlobStore(tmp_path / "s")
    layer = store.put_layer(lambda t: oci.add_tree(t, tmp_path / "a", empty=frozenset({"dev"})))
    members = layer_members(store, layer)
    names = [m.name for m in members]
    assert names == [
        "dev", "etc", "etc/conf", "usr", "usr/bin", "usr/bin/alias", "usr/bin/tool",
        "usr/bin/tool-again",
    ]  # fmt: skip
    assert {m.mtime for m in members} == {0}
    assert {(m.uname, m.gname) for m in members} == {("", "")}
    by_name = {m.name: m for m in members}
    assert by_name["usr/bin/tool"].mode == 0o755
    assert by_name["usr/bin/alias"].issym() and by_name["usr/bin/alias"].linkname == "tool"
    again = by_name["usr/bin/tool-again"]
    assert again.islnk() and again.linkname == "usr/bin/tool"


def test_diff_id_and_digest_are_of_the_plain_and_the_compressed_tar(tmp_path: Path) -> None:
    store = oci.BlobStore(tmp_path)
    layer = store.put_layer(lambda t: oci.add_file(t, "hello", b"hi\n", 0o644))
    compressed = store.path(layer.blob).read_bytes()
    assert layer.blob.digest == "sha256:" + hashlib.sha256(compressed).hexdigest()
    assert layer.blob.size == len(compressed)
    plain = gzip.decompress(compressed)
    assert layer.diff_id == "sha256:" + hashlib.sha256(plain).hexdigest()
    # gzip header: no file name flag, mtime 0 (bytes 4-7)
    assert compressed[3] & 0x08 == 0
    assert compressed[4:8] == b"\0\0\0\0"


@pytest.mark.skipif(os.geteuid() != 0, reason="overlay whiteouts are device nodes: needs root")
def test_overlay_whiteouts_become_oci_whiteouts(tmp_path: Path) -> None:
    upper = tmp_path / "upper"
    (upper / "etc/gone-dir").mkdir(parents=True)
    os.mknod(upper / "etc/removed", 0o600 | 0o020000, os.makedev(0, 0))  # S_IFCHR 0/0
    os.setxattr(upper / "etc/gone-dir", "trusted.overlay.opaque", b"y")
    store = oci.BlobStore(tmp_path / "s")
    layer = store.put_layer(lambda t: oci.add_tree(t, upper))
    members = {m.name: m for m in layer_members(store, layer)}
    assert members["etc/.wh.removed"].isreg() and members["etc/.wh.removed"].size == 0
    assert "etc/removed" not in members
    assert "etc/gone-dir/.wh..wh..opq" in members


def build_image(tmp_path: Path) -> tuple[Any, Any, Path]:
    store = oci.BlobStore(tmp_path / "store")
    layers = [
        store.put_layer(lambda t: oci.add_file(t, "a", b"first", 0o644)),
        store.put_layer(lambda t: oci.add_file(t, "b", b"second", 0o755)),
    ]
    spec = oci.ImageSpec(
        user="65532:65532", entrypoint=["lws"], cmd=["controller"], env=["A=1"],
        exposed_ports=[9443, 8081],
    )  # fmt: skip
    image = oci.assemble(store, "docker.io/library/x:1.2", spec, layers, ["one", "two"], "amd64")
    archive = tmp_path / "x.oci.tar"
    oci.write_archive(store, image, archive)
    return store, image, archive


def read_json(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.extractfile(name)
    assert member is not None
    return json.load(member)


def blob_bytes(tar: tarfile.TarFile, digest: str) -> bytes:
    member = tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:"))
    assert member is not None
    return member.read()


def test_archive_is_an_oci_layout_containerd_names_by_annotation(tmp_path: Path) -> None:
    _, _, archive = build_image(tmp_path)
    with tarfile.open(archive) as tar:
        assert read_json(tar, "oci-layout") == {"imageLayoutVersion": "1.0.0"}
        index = read_json(tar, "index.json")
        (entry,) = index["manifests"]
        assert entry["annotations"] == {
            "io.containerd.image.name": "docker.io/library/x:1.2",
            "org.opencontainers.image.ref.name": "1.2",
        }
        assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
        manifest_bytes = blob_bytes(tar, entry["digest"])
        assert entry["digest"] == "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
        assert entry["size"] == len(manifest_bytes)
        manifest = json.loads(manifest_bytes)
        config = json.loads(blob_bytes(tar, manifest["config"]["digest"]))
        diff_ids = []
        for descriptor in manifest["layers"]:
            data = blob_bytes(tar, descriptor["digest"])
            assert len(data) == descriptor["size"]
            assert descriptor["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
            diff_ids.append("sha256:" + hashlib.sha256(gzip.decompress(data)).hexdigest())
        assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
        (docker,) = read_json(tar, "manifest.json")
        assert docker["RepoTags"] == ["docker.io/library/x:1.2"]
        assert tar.extractfile(docker["Config"]) is not None


def test_config_carries_the_runtime_settings(tmp_path: Path) -> None:
    store, image, _ = build_image(tmp_path)
    config = json.loads(store.path(image.config).read_bytes())
    assert config["config"] == {
        "User": "65532:65532",
        "Entrypoint": ["lws"],
        "Cmd": ["controller"],
        "Env": ["A=1"],
        "ExposedPorts": {"9443/tcp": {}, "8081/tcp": {}},
        "WorkingDir": "/",
    }
    assert [h["created_by"] for h in config["history"]] == ["one", "two"]
    assert config["architecture"] == "amd64" and config["os"] == "linux"


def test_labels_and_empty_folders_reach_the_image(tmp_path: Path) -> None:
    store = oci.BlobStore(tmp_path / "store")

    def fill(tar: Any) -> None:
        oci.add_dir(tar, "tmp", 0o1777)

    layer = store.put_layer(fill)
    spec = oci.ImageSpec(user="0:0", entrypoint=["/x"], labels={"org.example": "stand-in"})
    image = oci.assemble(store, "docker.io/library/x:1", spec, [layer], ["tmp"], "amd64")
    config = json.loads(store.path(image.config).read_bytes())
    assert config["config"]["Labels"] == {"org.example": "stand-in"}
    with tarfile.open(store.path(layer.blob), "r:gz") as tar:
        (entry,) = tar.getmembers()
    assert (entry.name, entry.isdir(), entry.mode, entry.uid) == ("tmp", True, 0o1777, 0)


def test_the_same_image_gives_the_same_archive_bytes(tmp_path: Path) -> None:
    _, _, first = build_image(tmp_path / "1")
    _, _, second = build_image(tmp_path / "2")
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_history_must_match_the_layers(tmp_path: Path) -> None:
    store = oci.BlobStore(tmp_path)
    layer = store.put_layer(lambda t: oci.add_file(t, "a", b"", 0o644))
    spec = oci.ImageSpec(user="0", entrypoint=["/a"])
    with pytest.raises(ValueError, match="1 layers but 2 history entries"):
        oci.assemble(store, "r:1", spec, [layer], ["x", "y"], "amd64")


def test_an_archive_missing_a_blob_is_refused(tmp_path: Path) -> None:
    store, image, _ = build_image(tmp_path)
    store.path(image.layers[0].blob).unlink()
    with pytest.raises(FileNotFoundError, match="is not in"):
        oci.write_archive(store, image, tmp_path / "again.tar")
    assert not (tmp_path / "again.tar").exists()


def test_a_failed_layer_leaves_no_blob_behind(tmp_path: Path) -> None:
    store = oci.BlobStore(tmp_path)

    def fail(tar: Any) -> None:
        oci.add_file(tar, "a", b"x", 0o644)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.put_layer(fail)
    assert list(store.blobs.iterdir()) == []
