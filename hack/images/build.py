"""Builds the images (recipes.py, e2e_images.py) into OCI archives in a cache folder, each named by
the hash of its inputs, and prints one line per image on stdout:

    NAME REF ARCHIVE

    python3 hack/images/build.py --cache DIR [--check] [--arch ARCH] [NAME ...]

--check builds nothing: it prints the listing and exits 0 when every archive is
there, else exits 3. --arch builds for another architecture (amd64, arm64) than this
machine's; only the images made of Debian packages and Python are built that way
(the controller by default), as the others are compiled here for this machine.
Progress and sizes go to stderr. Run by hack/build-images.sh, which holds the lock
and installs the Debian tools first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import e2e_images
import oci
import recipes
import rootfs

NOT_BUILT = 3
# Every image by name; with no names, only `make image`'s three (recipes.RECIPES).
ALL = {**recipes.RECIPES, **e2e_images.RECIPES}
# What can be built for another architecture, and what is by default.
FOREIGN = ("controller", "rendezvous", "nginx-standin", "curl-standin")
FOREIGN_DEFAULT = ["controller"]


@dataclass(frozen=True)
class Planned:
    recipe: recipes.Recipe
    archive: Path

    @property
    def meta(self) -> Path:  # sizes and blobs of the archive, beside it
        return self.archive.with_name(self.archive.name.removesuffix(".tar") + ".json")

    @property
    def built(self) -> bool:
        return self.meta.is_file() and self.archive.is_file()

    def line(self) -> str:
        return f"{self.recipe.name} {self.recipe.ref} {self.archive}"


def plan(ctx: recipes.Context, names: list[str]) -> list[Planned]:
    unknown = [n for n in names if n not in ALL]
    if unknown:
        known = ", ".join(ALL)
        raise SystemExit(f"build-images: unknown image {', '.join(unknown)} (images: {known})")
    if ctx.foreign:
        names = names or FOREIGN_DEFAULT
        native = [n for n in names if n not in FOREIGN]
        if native:
            raise SystemExit(
                f"build-images: {', '.join(native)} cannot be built for {ctx.arch} here "
                f"(compiled for this machine); for another architecture: {', '.join(FOREIGN)}"
            )
    out = []
    for name in names or list(recipes.RECIPES):
        recipe = ALL[name](ctx)
        out.append(Planned(recipe, ctx.cache / f"{name}-{recipe.key[:16]}.oci.tar"))
    return out


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def report(item: Planned) -> None:
    meta = json.loads(item.meta.read_text())
    layers = len(meta["layers"])
    rootfs.log(
        f"{item.recipe.name} {item.recipe.ref}: {mib(meta['compressedBytes'])} compressed, "
        f"{mib(meta['unpackedBytes'])} unpacked ({layers} layer{'s' if layers > 1 else ''})"
    )


def build(ctx: recipes.Context, item: Planned) -> None:
    started = time.monotonic()
    rootfs.log(f"building {item.recipe.name} {item.recipe.ref}")
    image = item.recipe.build(ctx)
    oci.write_archive(ctx.store, image, item.archive)
    meta = {
        "ref": image.ref,
        "arch": image.arch,
        "manifest": image.manifest.digest,
        "config": image.config.digest,
        "layers": [layer.to_json() for layer in image.layers],
        "compressedBytes": image.compressed_bytes,
        "unpackedBytes": image.unpacked_bytes,
        "seconds": round(time.monotonic() - started, 1),
    }
    item.meta.write_text(json.dumps(meta, indent=1) + "\n")  # last: marks the archive done
    rootfs.log(f"{item.recipe.name} built in {meta['seconds']}s: {item.archive}")


def prune(ctx: recipes.Context, built: list[Planned]) -> None:
    """Older archives of the images just built, base folders no image is built on any
    more and the blobs no archive or base lists any more go, so the cache does not grow
    with every change."""
    keep = {item.archive for item in built}
    for item in built:
        for old in ctx.cache.glob(f"{item.recipe.name}-*.oci.*"):
            if old.with_suffix(".tar") not in keep and old not in keep:
                old.unlink()
    current = {ctx.base_folder(packages) for packages in e2e_images.BASES}
    for old in ctx.cache.glob("base-*"):
        if old not in current:
            rootfs.remove_tree(old)
    used: set[str] = set()
    for meta in ctx.cache.glob("*.oci.json"):
        data = json.loads(meta.read_text())
        used |= {data["manifest"], data["config"], *(layer["digest"] for layer in data["layers"])}
    for stamp in ctx.cache.glob("base-*/layer.json"):
        used.add(json.loads(stamp.read_text())["digest"])
    for blob in ctx.store.blobs.glob("*"):
        if "sha256:" + blob.name not in used and ".tmp" not in blob.name:
            blob.unlink()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="the images folder")
    parser.add_argument("--check", action="store_true", help="only say whether all are built")
    parser.add_argument("--arch", help="amd64 or arm64 (default: this machine's)")
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(recipes.RECIPES))
    args = parser.parse_args(argv)
    ctx = recipes.Context(args.cache.resolve(), args.arch)
    planned = plan(ctx, args.names)
    missing = [item for item in planned if not item.built]
    if args.check and missing:
        rootfs.log(f"to build: {', '.join(item.recipe.name for item in missing)}")
        return NOT_BUILT
    for item in missing:
        build(ctx, item)
    if missing:
        prune(ctx, missing)
    for item in planned:
        report(item)
    for item in planned:
        print(item.line())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
