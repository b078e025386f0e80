"""OCI image pieces written without a container engine: gzip layers from a folder or
from in-memory files, JSON blobs, and the OCI layout tar that `ctr images import`
(and `docker load`, `skopeo copy oci-archive:`) reads.

Everything is deterministic, so an unchanged input gives the same digests: tar entries
in sorted order with fixed mtimes and no user or group names, gzip with mtime 0 and no
file name, JSON with sorted keys.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

# Every mtime in a layer, and the images' "created": the Unix epoch. Python bytecode in
# the images is hash-based (rootfs.py), so nothing relies on real mtimes.
EPOCH = 0
CREATED = "1970-01-01T00:00:00Z"

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"

# containerd names an imported image after this annotation; other tools read the
# standard one, which holds only the tag.
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"

# Level 9 makes the base layer about 3% smaller than 6 for twice the time.
GZIP_LEVEL = 6


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    media_type: str

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}

    @property
    def hex(self) -> str:
        return self.digest.removeprefix("sha256:")


@dataclass(frozen=True)
class Layer:
    blob: Blob
    diff_id: str  # digest of the uncompressed tar, as the image config lists it
    content_bytes: int  # total size of the regular files in it

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.blob.digest,
            "size": self.blob.size,
            "diffId": self.diff_id,
            "contentBytes": self.content_bytes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Layer:
        blob = Blob(str(data["digest"]), int(data["size"]), LAYER_TYPE)
        return cls(blob, str(data["diffId"]), int(data["contentBytes"]))


class BlobStore:
    """A folder of blobs named by digest (blobs/sha256/HEX), shared by every image so
    that a layer two images hold (the Debian base) is written once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blobs = root / "blobs" / "sha256"

    def path(self, blob: Blob) -> Path:
        return self.blobs / blob.hex

    def has(self, blob: Blob) -> bool:
        path = self.path(blob)
        return path.is_file() and path.stat().st_size == blob.size

    def put_bytes(self, data: bytes, media_type: str) -> Blob:
        blob = Blob("sha256:" + hashlib.sha256(data).hexdigest(), len(data), media_type)
        if not self.has(blob):
            self.blobs.mkdir(parents=True, exist_ok=True)
            tmp = self.path(blob).with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            tmp.replace(self.path(blob))
        return blob

    def put_json(self, obj: Any, media_type: str) -> Blob:
        return self.put_bytes(canonical_json(obj), media_type)

    def put_layer(self, fill: Callable[[LayerWriter], None]) -> Layer:
        """Write the layer that `fill` adds entries to, compressed, into the store."""
        self.blobs.mkdir(parents=True, exist_ok=True)
        tmp = self.blobs / f"layer.tmp{os.getpid()}"
        try:
            with tmp.open("wb") as out:
                compressed = _Digesting(out)
                with gzip.GzipFile(
                    filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=GZIP_LEVEL
                ) as gz:
                    plain = _Digesting(gz)
                    with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
                        counter = LayerWriter(tar)
                        fill(counter)
            blob = Blob("sha256:" + compressed.sha.hexdigest(), compressed.count, LAYER_TYPE)
            tmp.replace(self.path(blob))
        finally:
            tmp.unlink(missing_ok=True)
        return Layer(blob, "sha256:" + plain.sha.hexdigest(), counter.content_bytes)


class _Writable(Protocol):
    def write(self, data: Any, /) -> int: ...


class _Digesting(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to `target`."""

    def __init__(self, target: _Writable) -> None:
        self.target = target
        self.sha = hashlib.sha256()
        self.count = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile asks where it starts
        return self.count

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self.count += view.nbytes
        self.target.write(view)
        return view.nbytes


class TarSink(Protocol):
    """Where entries go: a TarFile, or a LayerWriter."""

    def addfile(self, tarinfo: tarfile.TarInfo, fileobj: IO[bytes] | None = None) -> None: ...


class LayerWriter:
    """The tar of one layer; adds up the regular files' sizes (the unpacked size)."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self._tar = tar
        self.content_bytes = 0

    def addfile(self, tarinfo: tarfile.TarInfo, fileobj: IO[bytes] | None = None) -> None:
        if tarinfo.isreg():
            self.content_bytes += tarinfo.size
        self._tar.addfile(tarinfo, fileobj)


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _entry(name: str, kind: bytes, mode: int, uid: int = 0, gid: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.uname = info.gname = ""
    info.mtime = EPOCH
    return info


def add_file(tar: TarSink, name: str, data: bytes, mode: int) -> None:
    """A regular file owned by root."""
    info = _entry(name, tarfile.REGTYPE, mode)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar: TarSink, name: str, mode: int) -> None:
    """A folder owned by root (e.g. an image's empty /tmp)."""
    tar.addfile(_entry(name, tarfile.DIRTYPE, mode))


def add_tree(tar: TarSink, root: Path, *, empty: frozenset[str] = frozenset()) -> None:
    """Everything under `root` (not root itself), depth first in sorted order, owners
    and modes kept. The folders named in `empty` (relative, e.g. "dev") are added
    without their contents. Sockets are left out; extended attributes are not kept.

    Overlay whiteouts (character devices 0/0, and folders marked opaque) become the
    OCI whiteout files, so an overlayfs upper folder can be added as a layer."""
    hardlinks: dict[tuple[int, int], str] = {}
    for path, name in _walk(root, "", empty):
        info = _tree_entry(path, name, hardlinks)
        if info is None:
            continue
        if info.isreg() and info.size:  # (an overlay whiteout is empty, and no file)
            with path.open("rb") as f:
                tar.addfile(info, f)
        else:
            tar.addfile(info)
        if info.isdir() and _is_opaque(path):
            add_file(tar, f"{name}/.wh..wh..opq", b"", 0o644)


def _walk(folder: Path, prefix: str, empty: frozenset[str]) -> Iterator[tuple[Path, str]]:
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = prefix + entry.name
        path = Path(entry.path)
        yield path, name
        if entry.is_dir(follow_symlinks=False) and name not in empty:
            yield from _walk(path, name + "/", empty)


def _tree_entry(
    path: Path, name: str, hardlinks: dict[tuple[int, int], str]
) -> tarfile.TarInfo | None:
    st = path.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # an overlay whiteout
        parent, _, base = name.rpartition("/")
        return _entry(f"{parent}/.wh.{base}" if parent else f".wh.{base}", tarfile.REGTYPE, 0)
    if stat.S_ISSOCK(st.st_mode):
        return None
    kind = _KINDS.get(stat.S_IFMT(st.st_mode))
    if kind is None:
        raise ValueError(f"{path}: unsupported file type {stat.S_IFMT(st.st_mode):o}")
    info = _entry(name, kind, mode, st.st_uid, st.st_gid)
    if kind == tarfile.REGTYPE:
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in hardlinks:
            info.type = tarfile.LNKTYPE
            info.linkname = hardlinks[key]
        else:
            hardlinks[key] = name
            info.size = st.st_size
    elif kind == tarfile.SYMTYPE:
        info.linkname = os.readlink(path)
    elif kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
    return info


_KINDS = {
    stat.S_IFREG: tarfile.REGTYPE,
    stat.S_IFDIR: tarfile.DIRTYPE,
    stat.S_IFLNK: tarfile.SYMTYPE,
    stat.S_IFCHR: tarfile.CHRTYPE,
    stat.S_IFBLK: tarfile.BLKTYPE,
    stat.S_IFIFO: tarfile.FIFOTYPE,
}


def _is_opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


@dataclass(frozen=True)
class ImageSpec:
    """What an image's config says besides its layers (the Docker/OCI field names)."""

    user: str
    entrypoint: list[str]
    cmd: list[str] | None = None
    env: list[str] | None = None
    exposed_ports: list[int] | None = None
    working_dir: str = "/"
    labels: dict[str, str] | None = None


def config_json(
    spec: ImageSpec, layers: list[Layer], history: list[str], arch: str
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "User": spec.user,
        "Entrypoint": spec.entrypoint,
        "WorkingDir": spec.working_dir,
    }
    if spec.cmd is not None:
        config["Cmd"] = spec.cmd
    if spec.env:
        config["Env"] = spec.env
    if spec.exposed_ports:
        config["ExposedPorts"] = {f"{port}/tcp": {} for port in spec.exposed_ports}
    if spec.labels:
        config["Labels"] = spec.labels
    return {
        "architecture": arch,
        "os": "linux",
        "created": CREATED,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": CREATED, "created_by": step} for step in history],
    }


@dataclass(frozen=True)
class Image:
    ref: str  # registry/repository:tag
    manifest: Blob
    config: Blob
    layers: list[Layer]
    arch: str

    @property
    def tag(self) -> str:
        return self.ref.rpartition(":")[2]

    @property
    def compressed_bytes(self) -> int:
        return sum(layer.blob.size for layer in self.layers)

    @property
    def unpacked_bytes(self) -> int:
        return sum(layer.content_bytes for layer in self.layers)


def assemble(
    store: BlobStore, ref: str, spec: ImageSpec, layers: list[Layer], history: list[str], arch: str
) -> Image:
    """Config and manifest blobs for `layers` (already in `store`), bottom layer first."""
    if len(history) != len(layers):
        raise ValueError(f"{ref}: {len(layers)} layers but {len(history)} history entries")
    config = store.put_json(config_json(spec, layers, history, arch), CONFIG_TYPE)
    manifest = store.put_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": config.descriptor(),
            "layers": [layer.blob.descriptor() for layer in layers],
        },
        MANIFEST_TYPE,
    )
    return Image(ref, manifest, config, layers, arch)


def index_json(image: Image) -> dict[str, Any]:
    descriptor = image.manifest.descriptor()
    descriptor["platform"] = {"architecture": image.arch, "os": "linux"}
    descriptor["annotations"] = {CONTAINERD_NAME: image.ref, REF_NAME: image.tag}
    return {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [descriptor]}


def docker_manifest_json(image: Image) -> list[dict[str, Any]]:
    """manifest.json of `docker save`, so that older `docker load` takes the archive too."""
    return [
        {
            "Config": f"blobs/sha256/{image.config.hex}",
            "RepoTags": [image.ref],
            "Layers": [f"blobs/sha256/{layer.blob.hex}" for layer in image.layers],
        }
    ]


def write_archive(store: BlobStore, image: Image, dest: Path) -> None:
    """The OCI image layout of `image` as one uncompressed tar at `dest` (atomically)."""
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    blobs = sorted(
        {image.config, image.manifest, *(layer.blob for layer in image.layers)},
        key=lambda b: b.digest,
    )
    try:
        with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
            _add_blobs(tar, store, image.ref, blobs)
            add_file(tar, "index.json", canonical_json(index_json(image)), 0o644)
            add_file(tar, "manifest.json", canonical_json(docker_manifest_json(image)), 0o644)
            add_file(tar, "oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}), 0o644)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def _add_blobs(tar: tarfile.TarFile, store: BlobStore, ref: str, blobs: list[Blob]) -> None:
    tar.addfile(_entry("blobs", tarfile.DIRTYPE, 0o755))
    tar.addfile(_entry("blobs/sha256", tarfile.DIRTYPE, 0o755))
    for blob in blobs:
        if not store.has(blob):
            raise FileNotFoundError(f"{ref}: blob {blob.digest} is not in {store.root}")
        info = _entry(f"blobs/sha256/{blob.hex}", tarfile.REGTYPE, 0o644)
        info.size = blob.size
        with store.path(blob).open("rb") as f:
            tar.addfile(info, f)


def read_archive(store: BlobStore, archive: Path) -> Image:
    """The image of an archive `write_archive` wrote, its blobs copied into `store`."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("blobs/sha256/"):
                data = tar.extractfile(member)
                assert data is not None
                dest = store.blobs / member.name.removeprefix("blobs/sha256/")
                if not dest.is_file() or dest.stat().st_size != member.size:
                    store.blobs.mkdir(parents=True, exist_ok=True)
                    with dest.open("wb") as out:
                        while chunk := data.read(1 << 20):
                            out.write(chunk)
        index_file = tar.extractfile("index.json")
        assert index_file is not None
        (descriptor,) = json.load(index_file)["manifests"]
    manifest = json.loads((store.blobs / descriptor["digest"].removeprefix("sha256:")).read_bytes())
    config_blob = Blob(manifest["config"]["digest"], manifest["config"]["size"], CONFIG_TYPE)
    config = json.loads(store.path(config_blob).read_bytes())
    layers = [
        Layer(Blob(d["digest"], d["size"], LAYER_TYPE), diff_id, 0)
        for d, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"], strict=True)
    ]
    ref = descriptor.get("annotations", {}).get(CONTAINERD_NAME, "")
    manifest_blob = Blob(descriptor["digest"], descriptor["size"], MANIFEST_TYPE)
    return Image(ref, manifest_blob, config_blob, layers, config["architecture"])


def retag(image: Image, ref: str) -> Image:
    """The same image (same digests) under another name: only index.json changes."""
    return Image(ref, image.manifest, image.config, image.layers, image.arch)


def put_index(store: BlobStore, images: list[Image]) -> Blob:
    """An image index (a multi-architecture image) over `images`, one per platform."""
    manifests = []
    for image in images:
        descriptor = image.manifest.descriptor()
        descriptor["platform"] = {"architecture": image.arch, "os": "linux"}
        manifests.append(descriptor)
    return store.put_json(
        {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": manifests}, INDEX_TYPE
    )


def write_index_archive(store: BlobStore, ref: str, images: list[Image], dest: Path) -> Blob:
    """The OCI layout of one multi-architecture image named `ref`: index.json points at
    an image index (what a registry serves for the tag, and `skopeo copy --all`
    pushes), which lists each image's manifest with its platform. Returns that index."""
    index = put_index(store, images)
    tag = ref.rpartition(":")[2]
    outer = index.descriptor()
    outer["annotations"] = {CONTAINERD_NAME: ref, REF_NAME: tag}
    blobs: dict[str, Blob] = {index.digest: index}
    for image in images:
        for blob in (image.manifest, image.config, *(layer.blob for layer in image.layers)):
            blobs[blob.digest] = blob
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    try:
        with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
            _add_blobs(tar, store, ref, sorted(blobs.values(), key=lambda b: b.digest))
            layout_index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [outer]}
            add_file(tar, "index.json", canonical_json(layout_index), 0o644)
            add_file(tar, "oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}), 0o644)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return index
