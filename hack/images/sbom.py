"""CycloneDX 1.5 SBOMs of a release, made from what the artefacts hold rather than from
what the recipes meant to put there: an image's Debian packages are read from the
dpkg status file in its layers and its Python distributions from their `.dist-info`
METADATA; the wheel's SBOM is the package and the dependency closure the image
installed from it (pinned by constraints.txt).

Deterministic (no timestamps; the serial number is derived from the content), so an
unchanged release gives the same files and the same SHA256SUMS lines.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import tarfile
import uuid
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import PurePosixPath
from typing import Any

import oci

DPKG_STATUS = "var/lib/dpkg/status"
OS_RELEASE = ("etc/os-release", "usr/lib/os-release")
DIST_INFO = re.compile(
    r"^usr/(?:local/)?lib/python3[^/]*/(?:dist|site)-packages/[^/]+\.dist-info/METADATA$"
)
COPYRIGHT = re.compile(r"^usr/share/doc/([^/]+)/copyright$")
# A licence line of a machine-readable (DEP-5) copyright file.
DEP5_LICENSE = re.compile(r"^License:[ \t]*(\S[^\n]*)$", re.MULTILINE)
TOOL = "leaderworkerset hack/images/sbom.py"
SPEC = "1.5"


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    arch: str
    source: str


@dataclass(frozen=True)
class PyDist:
    name: str
    version: str
    licenses: list[dict[str, Any]]
    requires: list[str]  # normalized names of the unconditional requirements


@dataclass
class Contents:
    """What an image's layers hold, the upper layer's copy of a file winning."""

    files: dict[str, bytes] = field(default_factory=dict)

    def read(self, store: oci.BlobStore, image: oci.Image) -> Contents:
        for layer in image.layers:
            with gzip.open(store.path(layer.blob)) as raw, tarfile.open(fileobj=raw) as tar:
                for member in tar:
                    name = member.name.removeprefix("./")
                    if member.isfile() and _wanted(name):
                        data = tar.extractfile(member)
                        assert data is not None
                        self.files[name] = data.read()
        return self

    def debs(self) -> list[Deb]:
        status = self.files.get(DPKG_STATUS, b"").decode()
        found = []
        for stanza in status.split("\n\n"):
            fields = _control(stanza)
            if fields.get("Status", "").endswith(" installed"):
                name = fields["Package"]
                source = fields.get("Source", name).split(" ")[0]
                found.append(Deb(name, fields["Version"], fields["Architecture"], source))
        return sorted(found, key=lambda d: d.name)

    def deb_licenses(self, deb: Deb) -> list[str]:
        text = self.files.get(f"usr/share/doc/{deb.name}/copyright", b"").decode(errors="replace")
        names: list[str] = []
        for found in DEP5_LICENSE.findall(text):
            name = found.strip()
            if name not in names:
                names.append(name)
        return names

    def python(self) -> list[PyDist]:
        dists = [_py_dist(data) for name, data in self.files.items() if DIST_INFO.match(name)]
        return sorted(dists, key=lambda d: d.name)

    def os_release(self) -> dict[str, str]:
        for name in OS_RELEASE:
            if name in self.files:
                pairs = (line.split("=", 1) for line in self.files[name].decode().splitlines())
                return {k: v.strip('"') for k, v in (p for p in pairs if len(p) == 2)}
        return {}


def _wanted(name: str) -> bool:
    return (
        name == DPKG_STATUS
        or name in OS_RELEASE
        or bool(DIST_INFO.match(name))
        or bool(COPYRIGHT.match(name))
    )


def _control(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = ""
    for line in stanza.splitlines():
        if line[:1].isspace() and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def normalize(name: str) -> str:
    """PEP 503's form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _py_dist(metadata: bytes) -> PyDist:
    message = HeaderParser().parsestr(metadata.decode(errors="replace"))
    licenses: list[dict[str, Any]] = []
    expression = message.get("License-Expression")
    if expression:
        licenses.append({"expression": expression.strip()})
    else:
        for classifier in message.get_all("Classifier") or []:
            if classifier.startswith("License ::"):
                licenses.append({"license": {"name": classifier.split(" :: ")[-1].strip()}})
        text = (message.get("License") or "").strip()
        if not licenses and text and "\n" not in text and len(text) < 100:
            licenses.append({"license": {"name": text}})
    requires = []
    for requirement in message.get_all("Requires-Dist") or []:
        spec, _, marker = requirement.partition(";")
        if "extra" in marker:  # only with an extra the package was not installed with
            continue
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if found:
            requires.append(normalize(found.group(1)))
    return PyDist(normalize(message["Name"]), message["Version"], licenses, requires)


def _serial(*parts: str) -> str:
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, '|'.join(parts))}"


def _py_component(dist: PyDist) -> dict[str, Any]:
    purl = f"pkg:pypi/{dist.name}@{dist.version}"
    component: dict[str, Any] = {
        "type": "library",
        "bom-ref": purl,
        "name": dist.name,
        "version": dist.version,
        "purl": purl,
    }
    if dist.licenses:
        component["licenses"] = dist.licenses
    return component


def _py_dependencies(dists: list[PyDist]) -> list[dict[str, Any]]:
    """Each distribution's unconditional requirements among those installed."""
    refs = {d.name: f"pkg:pypi/{d.name}@{d.version}" for d in dists}
    return [
        {
            "ref": refs[d.name],
            "dependsOn": sorted({refs[r] for r in d.requires if r in refs}),
        }
        for d in dists
    ]


def image_sbom(contents: Contents, image: oci.Image, name: str, version: str) -> dict[str, Any]:
    """The SBOM of one image (one architecture): its Debian packages, the Python
    distributions pip installed, and the image itself as the subject."""
    os_release = contents.os_release()
    distro = f"{os_release.get('ID', 'debian')}-{os_release.get('VERSION_ID', '')}"
    subject_ref = f"pkg:oci/{name.rpartition('/')[2]}@{image.manifest.digest.replace(':', '%3A')}"
    subject_ref += f"?arch={image.arch}&repository_url={name}"
    components: list[dict[str, Any]] = [
        {
            "type": "operating-system",
            "bom-ref": f"os:{distro}",
            "name": os_release.get("ID", "debian"),
            "version": os_release.get("VERSION_ID", ""),
            "description": os_release.get("PRETTY_NAME", ""),
        }
    ]
    for deb in contents.debs():
        purl = f"pkg:deb/debian/{deb.name}@{deb.version}?arch={deb.arch}&distro={distro}"
        component: dict[str, Any] = {
            "type": "library",
            "bom-ref": purl,
            "name": deb.name,
            "version": deb.version,
            "purl": purl,
        }
        licenses = contents.deb_licenses(deb)
        if licenses:
            component["licenses"] = [{"license": {"name": n}} for n in licenses]
        if deb.source != deb.name:
            component["properties"] = [{"name": "debian:source", "value": deb.source}]
        components.append(component)
    dists = contents.python()
    components += [_py_component(d) for d in dists]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC,
        "serialNumber": _serial("image", image.manifest.digest),
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": TOOL}]},
            "component": {
                "type": "container",
                "bom-ref": subject_ref,
                "name": name,
                "version": version,
                "purl": subject_ref,
                "hashes": [{"alg": "SHA-256", "content": image.manifest.hex}],
                "properties": [
                    {"name": "oci:architecture", "value": image.arch},
                    {"name": "oci:os", "value": "linux"},
                    {"name": "oci:manifest", "value": image.manifest.digest},
                ],
            },
        },
        "components": components,
        "dependencies": _py_dependencies(dists),
    }


def wheel_sbom(wheel: bytes, wheel_name: str, installed: list[PyDist]) -> dict[str, Any]:
    """The SBOM of the wheel: the package as the subject, and the distributions it pulls
    in, at the versions the release's image installed (constraints.txt's pins)."""
    (own,) = [d for d in installed if d.name == "leaderworkerset"]
    deps = [d for d in installed if d.name != own.name]
    subject = _py_component(own)
    subject["hashes"] = [{"alg": "SHA-256", "content": hashlib.sha256(wheel).hexdigest()}]
    subject["properties"] = [{"name": "python:wheel", "value": PurePosixPath(wheel_name).name}]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC,
        "serialNumber": _serial("wheel", subject["hashes"][0]["content"]),
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": TOOL}]},
            "component": subject,
        },
        "components": [_py_component(d) for d in deps],
        "dependencies": _py_dependencies(installed),
    }
