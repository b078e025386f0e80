"""Template revisions: the snapshot of the rollout-relevant spec, its
key, the ControllerRevision objects and the decisions taken on them.

Everything here is pure: the LWS reconciler lists ControllerRevisions, calls
`current_revision` / `detect_update` / `revisions_to_delete`, and performs the
creates and deletes they ask for. The pod reconciler reads the revision a leader was
created from (`find_revision`, `apply_revision`) to build its workers.

Deviation from upstream: while the leader StatefulSet is missing, an existing
revision whose key equals the fresh hash (and whose content matches) is reused
instead of creating a duplicate with a higher revision number (see
docs/upstream-deviations.md#no-duplicate-revisions).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, controller_ref, labels_of, meta_of, revision_key_of
from leaderworkerset.controllers import events
from leaderworkerset.controllers.semantic_json import normalized
from leaderworkerset.group.names import revision_name
from leaderworkerset.group.ownership import lws_reference
from leaderworkerset.runtime.events import object_reference

KEY_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
FNV32_OFFSET: Final = 2166136261
FNV32_PRIME: Final = 16777619
PATCH_DIRECTIVE: Final = "$patch"
_SNAPSHOT_MEMBERS: Final = ("leaderWorkerTemplate", "networkConfig")

# Go's encoding/json escapes these so that JSON is safe to embed in HTML.
_GO_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GO_ESCAPE_PATTERN: Final = re.compile("[<>&\u2028\u2029]")


# --- Snapshot and key ----------------------------------------------------------------
def snapshot(lws: JSON) -> JSON:
    """The revision content: leaderWorkerTemplate and networkConfig only, each marked
    `$patch: replace`. An absent networkConfig is written as Shared, so both hash alike."""
    spec = lws.get("spec") or {}
    template = copy.deepcopy(spec.get("leaderWorkerTemplate") or {})
    network = spec.get("networkConfig")
    network = (
        copy.deepcopy(network)
        if network is not None
        else {"subdomainPolicy": c.SUBDOMAIN_POLICY_SHARED}
    )
    template[PATCH_DIRECTIVE] = "replace"
    network[PATCH_DIRECTIVE] = "replace"
    return {"spec": {"leaderWorkerTemplate": template, "networkConfig": network}}


def canonical_json(value: Any) -> bytes:
    """Sorted keys at every depth, compact, UTF-8, with Go's HTML-safe escapes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # The escaped characters can only occur inside JSON strings, so a plain
    # substitution over the whole document is exact.
    text = _GO_ESCAPE_PATTERN.sub(lambda m: _GO_ESCAPES[m.group(0)], text)
    return text.encode("utf-8", "surrogatepass")


def fnv1_32(data: bytes) -> int:
    h = FNV32_OFFSET
    for byte in data:
        h = (h * FNV32_PRIME) & 0xFFFFFFFF
        h ^= byte
    return h


def encode_key(value: int) -> str:
    return "".join(KEY_ALPHABET[ord(ch) % len(KEY_ALPHABET)] for ch in str(value))


def hash_key(data: bytes) -> str:
    """The revision key, as upstream computes it: FNV-1 32-bit over the bytes, its
    decimal digits mapped to the alphabet."""
    return encode_key(fnv1_32(data))


def snapshot_key(lws: JSON) -> str:
    """The key of the LWS's current spec."""
    return hash_key(canonical_json(snapshot(lws)))


# --- ControllerRevision objects --------------------------------------------------------
def revision_number(revision: JSON) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def revision_data(revision: JSON) -> JSON:
    data = revision.get("data")
    if isinstance(data, str | bytes):
        data = json.loads(data)
    return data if isinstance(data, dict) else {}


def new_revision(lws: JSON, number: int, key_override: str = "") -> JSON:
    """The ControllerRevision of the current spec. The name always carries the
    content hash; the key label is `key_override` when given (adopting a StatefulSet
    whose revision is missing), else the same hash."""
    meta = meta_of(lws)
    lws_name = str(meta.get("name", ""))
    data = snapshot(lws)
    content_hash = hash_key(canonical_json(data))
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(lws_name, content_hash, number),
            "namespace": meta.get("namespace", ""),
            "labels": {
                c.LABEL_SET_NAME: lws_name,
                c.LABEL_TEMPLATE_REVISION_HASH: key_override or content_hash,
            },
            "ownerReferences": [lws_reference(lws)],
        },
        "data": data,
        "revision": number,
    }


# --- Listing and lookup -------------------------------------------------------
def owned_revisions(lws: JSON, revisions: Iterable[JSON], key: str | None = None) -> list[JSON]:
    """Revisions labelled for this LWS (and `key`, if given) that it controls or that
    have no controller: orphans are read, never patched."""
    meta = meta_of(lws)
    name, uid = meta.get("name", ""), meta.get("uid", "")
    out = []
    for rev in revisions:
        labels = labels_of(rev)
        if labels.get(c.LABEL_SET_NAME) != name:
            continue
        if key is not None and revision_key_of(rev) != key:
            continue
        owner = controller_ref(rev)
        if owner is None or owner.get("uid") == uid:
            out.append(rev)
    return out


def find_revision(lws: JSON, revisions: Iterable[JSON], key: str) -> JSON | None:
    """The revision of `key`; the highest revision number wins among duplicates."""
    if not key:
        return None
    matches = owned_revisions(lws, revisions, key)
    return max(matches, key=revision_number) if matches else None


def next_revision_number(lws: JSON, revisions: Iterable[JSON]) -> int:
    return 1 + max((revision_number(r) for r in owned_revisions(lws, revisions)), default=0)


# --- Deciding which revision is current ----------------------------
@dataclass(frozen=True)
class RevisionChoice:
    """The revision to use; when `create` is set, the reconciler creates it first and
    records `event`."""

    revision: JSON
    create: bool
    event: events.Event | None = None


def current_revision(lws: JSON, sts: JSON | None, revisions: Sequence[JSON]) -> RevisionChoice:
    """Upstream's get-or-create of the revision, minus the I/O."""
    key = revision_key_of(sts)
    existing = find_revision(lws, revisions, key)
    if existing is not None:
        return RevisionChoice(existing, create=False)
    number = next_revision_number(lws, revisions)
    fresh = new_revision(lws, number, key_override=key)
    if sts is None:
        reusable = find_revision(lws, revisions, revision_key_of(fresh))
        if reusable is not None and same_content(lws, fresh, reusable):
            return RevisionChoice(reusable, create=False)
        event = events.revision_for_new_lws(revision_key_of(fresh), object_reference(fresh))
    else:
        event = events.revision_missing(key, object_reference(fresh))
    return RevisionChoice(fresh, create=True, event=event)


def detect_update(
    lws: JSON, sts: JSON | None, revision: JSON | None, revisions: Sequence[JSON]
) -> JSON | None:
    """The revision to create when the spec moved away from `revision`, else
    None. No leader StatefulSet means nothing to update yet."""
    if sts is None:
        return None
    proposed = new_revision(lws, next_revision_number(lws, revisions))
    if revision is not None and same_content(lws, proposed, revision):
        return None
    return proposed


def same_content(lws: JSON, proposed: JSON, stored: JSON) -> bool:
    return equal(proposed, stored) or semantically_equal(lws, proposed, stored)


def equal(a: JSON, b: JSON) -> bool:
    return canonical_json(revision_data(a)) == canonical_json(revision_data(b))


def semantically_equal(lws: JSON, proposed: JSON, stored: JSON) -> bool:
    """Equal once serialization drift is ignored: rebuild the snapshot from the LWS the
    stored revision describes, and compare normalized forms (see `normalized`)."""
    rebuilt = snapshot(apply_revision(lws, stored))
    return bool(normalized(rebuilt) == normalized(revision_data(proposed)))


# --- Reconstructing the LWS of a revision --------------------------------------
def apply_revision(lws: JSON, revision: JSON) -> JSON:
    """A copy of the live LWS with leaderWorkerTemplate and networkConfig replaced
    wholesale by the revision's. A member the revision does not carry (revisions
    written before networkConfig existed) keeps its live value, as the strategic
    merge patch upstream applies would."""
    out = copy.deepcopy(lws)
    spec = out.setdefault("spec", {})
    stored_spec = revision_data(revision).get("spec") or {}
    for member in _SNAPSHOT_MEMBERS:
        stored = stored_spec.get(member)
        if isinstance(stored, dict):
            spec[member] = {k: copy.deepcopy(v) for k, v in stored.items() if k != PATCH_DIRECTIVE}
    return out


# --- Truncation -----------------------------------------------------------------
def revisions_to_delete(lws: JSON, revisions: Iterable[JSON], keep_key: str) -> list[JSON]:
    """Every revision of this LWS whose key is not `keep_key`. Call only when the status
    computation says the rollout is done: older groups are rebuilt from old revisions."""
    return [r for r in owned_revisions(lws, revisions) if revision_key_of(r) != keep_key]
