#!/usr/bin/env python3
"""Refresh src/leaderworkerset/api/go/gotypes/k8s-<version>.json: the JSON
members of the Kubernetes Go types a DisaggregatedSet role template embeds, in Go's
declaration order, with their encoding options.

Upstream's DisaggregatedSet revision is a hash of Go's `encoding/json` output for the
role templates, decoded into typed structs: members come out in declaration order,
`omitempty` drops empty values, structs are always written, absent pointers and slices
become `null`. Reproducing that byte for byte needs, for every type reachable from a
PodTemplateSpec, a PersistentVolumeClaim and the StatefulSet claim retention policy,
the ordered list of (JSON name, type, options). This script reads them from the Go
sources of k8s.io/api and k8s.io/apimachinery (downloaded through the Go module proxy
with `go mod download`) and writes them as data; nothing else of the sources is kept.

Pin the version that upstream's release builds with (its go.mod's k8s.io/api), then
run it; `src/leaderworkerset/api/go/encoding.py` reads the result.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

# k8s.io/api in sigs.k8s.io/lws v0.10.0's go.mod.
K8S_GO_VERSION = "v0.36.3"
SOURCES = {
    "core/v1": ("k8s.io/api", "core/v1/types.go"),
    "apps/v1": ("k8s.io/api", "apps/v1/types.go"),
    "meta/v1": ("k8s.io/apimachinery", "pkg/apis/meta/v1/types.go"),
}
ROOTS = (
    "core/v1.PodTemplateSpec",
    "core/v1.PersistentVolumeClaim",
    "apps/v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
)
# Types whose Go encoding is their own (MarshalJSON), named by what they encode as.
SPECIAL = {
    "resource.Quantity": "quantity",
    "intstr.IntOrString": "intorstring",
    "metav1.Time": "time",
    "meta/v1.Time": "time",
    "metav1.MicroTime": "time",
    "meta/v1.MicroTime": "time",
    "metav1.FieldsV1": "raw",
    "meta/v1.FieldsV1": "raw",
    "types.UID": "string",
}
PRIMITIVES = {"string", "bool", "int", "int32", "int64", "float64", "byte"}
IMPORTS = {"metav1": "meta/v1", "corev1": "core/v1", "v1": "core/v1"}
OUT = Path(__file__).resolve().parents[1] / "src/leaderworkerset/api/go/gotypes"

_STRUCT = re.compile(r"^type (\w+) struct \{$")
_NAMED = re.compile(r"^type (\w+) =? ?(\S.*)$")
_FIELD = re.compile(r"^\t(?:(\w+) )?(\*?[\w.\[\]*]+) `([^`]*)`")
_JSON_TAG = re.compile(r'json:"([^"]*)"')


def module_dir(module: str) -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{K8S_GO_VERSION}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return Path(json.loads(out)["Dir"])


def parse(package: str, text: str) -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """Structs as [json name or "" (inline), Go type, options] and named non-struct types."""
    structs: dict[str, list[list[str]]] = {}
    named: dict[str, str] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if current is not None:
            if line == "}":
                current = None
                continue
            field = _FIELD.match(line)
            tag = _JSON_TAG.search(field.group(3)) if field else None
            if field is None or tag is None:
                continue
            name, *options = tag.group(1).split(",")
            if name == "-":
                continue
            current.append([name, qualify(package, field.group(2)), ",".join(options)])
            continue
        struct = _STRUCT.match(line)
        if struct:
            current = structs.setdefault(f"{package}.{struct.group(1)}", [])
            continue
        other = _NAMED.match(line)
        if other and "{" not in other.group(2) and "(" not in other.group(2):
            named[f"{package}.{other.group(1)}"] = qualify(package, other.group(2).strip())
    return structs, named


def qualify(package: str, go_type: str) -> str:
    """A Go type expression with every named type written package/version.Name."""
    for prefix in ("*", "[]"):
        if go_type.startswith(prefix):
            return prefix + qualify(package, go_type[len(prefix) :])
    if go_type.startswith("map["):
        key, value = go_type[4:].split("]", 1)
        return f"map[{qualify(package, key)}]{qualify(package, value)}"
    if go_type in PRIMITIVES or go_type in SPECIAL:
        return SPECIAL.get(go_type, go_type)
    if "." in go_type:
        alias, name = go_type.split(".", 1)
        qualified = f"{IMPORTS.get(alias, alias)}.{name}"
        return SPECIAL.get(qualified, qualified)
    qualified = f"{package}.{go_type}"
    return SPECIAL.get(qualified, qualified)


def resolve(go_type: str, named: dict[str, str]) -> str:
    """Named non-struct types replaced by what they are (Protocol -> string)."""
    for prefix in ("*", "[]"):
        if go_type.startswith(prefix):
            return prefix + resolve(go_type[len(prefix) :], named)
    if go_type.startswith("map["):
        key, value = go_type[4:].split("]", 1)
        return f"map[{resolve(key, named)}]{resolve(value, named)}"
    seen = set()
    while go_type in named and go_type not in seen:
        seen.add(go_type)
        go_type = named[go_type]
    if go_type.startswith(("*", "[]", "map[")):
        return resolve(go_type, named)
    return "bytes" if go_type == "[]byte" else go_type


def flatten(name: str, structs: dict[str, list[list[str]]], named: dict[str, str]) -> list:
    """The members of a struct, embedded (inline) structs' members in their place."""
    members: list[list[str]] = []
    for json_name, go_type, options in structs[name]:
        go_type = resolve(go_type, named)
        if json_name == "" and "inline" in options.split(","):
            members.extend(flatten(go_type, structs, named))
        elif json_name:
            members.append([json_name, go_type, options])
    return members


def referenced(go_type: str) -> list[str]:
    inner = go_type.lstrip("*")
    while inner.startswith(("[]", "*")):
        inner = inner[2:] if inner.startswith("[]") else inner[1:]
    if inner.startswith("map["):
        key, value = inner[4:].split("]", 1)
        return referenced(key) + referenced(value)
    return [inner] if "/" in inner else []


def main() -> int:
    structs: dict[str, list[list[str]]] = {}
    named: dict[str, str] = {}
    for package, (module, path) in SOURCES.items():
        found_structs, found_named = parse(package, (module_dir(module) / path).read_text())
        structs.update(found_structs)
        named.update(found_named)
    types: dict[str, list[list[str]]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in types:
            continue
        if name not in structs:
            print(f"no struct {name} in the sources", file=sys.stderr)
            return 1
        types[name] = flatten(name, structs, named)
        for _, go_type, _ in types[name]:
            todo.extend(referenced(go_type))
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"k8s-{K8S_GO_VERSION}.json"
    document = {
        "source": f"k8s.io/api and k8s.io/apimachinery {K8S_GO_VERSION} (hack/update-go-fields.py)",
        "types": dict(sorted(types.items())),
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {out}: {len(types)} types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
