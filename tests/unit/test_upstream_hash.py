"""The stored form of a kubectl-created manifest, and its template revision hash, equal
upstream's.

Upstream's defaulting webhook decodes the object into Go structs and patches it with
their encoding, so struct-typed members that the manifest omitted are stored. Its
controller then hashes the Go JSON of a patch holding leaderWorkerTemplate and
networkConfig. The expected hashes here come from an independent rendering of that
algorithm over patches written out by hand as Go would encode them; our webhook and
revision code only produce the actual values.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from leaderworkerset.controllers.lws.revisions import snapshot_key
from leaderworkerset.webhooks.leaderworkerset import default_object

JSON = dict[str, Any]


# --- upstream's algorithm, written out independently ------------------------------------


def go_json(value: Any) -> bytes:
    """encoding/json of a map[string]interface{}: sorted keys, no spaces, HTML-safe."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.encode()


def fnv32(data: bytes) -> int:
    """hash/fnv New32 (FNV-1: multiply, then xor)."""
    h = 0x811C9DC5
    for byte in data:
        h = (h * 0x01000193) % 2**32
        h ^= byte
    return h


def safe_encode(text: str) -> str:
    """k8s.io/apimachinery/pkg/util/rand.SafeEncodeString."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[ord(ch) % len(alphabet)] for ch in text)


def upstream_hash(patch: JSON) -> str:
    return safe_encode(str(fnv32(go_json(patch))))


# --- manifests as kubectl sends them, and the patch upstream hashes ---------------------

PAUSE_MANIFEST: JSON = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "pause", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "leaderWorkerTemplate": {
            "size": 2,
            "workerTemplate": {
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}
            },
        },
    },
}
PAUSE_PATCH: JSON = {
    "spec": {
        "leaderWorkerTemplate": {
            "$patch": "replace",
            "restartPolicy": "RecreateGroupOnPodRestart",
            "size": 2,
            "workerTemplate": {
                "metadata": {},
                "spec": {
                    "containers": [
                        {"image": "registry.k8s.io/pause:3.10", "name": "main", "resources": {}}
                    ]
                },
            },
        },
        "networkConfig": {"$patch": "replace", "subdomainPolicy": "Shared"},
    }
}

# Upstream's documented sample: resources given, template metadata omitted.
SAMPLE_MANIFEST: JSON = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "leaderworkerset-sample"},
    "spec": {
        "replicas": 3,
        "leaderWorkerTemplate": {
            "size": 4,
            "workerTemplate": {
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginxinc/nginx-unprivileged:1.27",
                            "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "50m"}},
                            "ports": [{"containerPort": 8080}],
                        }
                    ]
                }
            },
        },
    },
}
SAMPLE_PATCH: JSON = {
    "spec": {
        "leaderWorkerTemplate": {
            "$patch": "replace",
            "restartPolicy": "RecreateGroupOnPodRestart",
            "size": 4,
            "workerTemplate": {
                "metadata": {},
                "spec": {
                    "containers": [
                        {
                            "image": "nginxinc/nginx-unprivileged:1.27",
                            "name": "nginx",
                            "ports": [{"containerPort": 8080}],
                            "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "50m"}},
                        }
                    ]
                },
            },
        },
        "networkConfig": {"$patch": "replace", "subdomainPolicy": "Shared"},
    }
}

# Both templates, init containers, a resourceFieldRef and an ephemeral volume.
LEADER_WORKER_MANIFEST: JSON = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "lw"},
    "spec": {
        "leaderWorkerTemplate": {
            "size": 3,
            "leaderTemplate": {
                "metadata": {"labels": {"role": "leader"}},
                "spec": {
                    "initContainers": [{"name": "init", "image": "busybox"}],
                    "containers": [
                        {
                            "name": "leader",
                            "image": "busybox",
                            "env": [
                                {
                                    "name": "CPU",
                                    "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}},
                                }
                            ],
                        }
                    ],
                },
            },
            "workerTemplate": {
                "spec": {
                    "containers": [{"name": "worker", "image": "busybox"}],
                    "volumes": [
                        {
                            "name": "scratch",
                            "ephemeral": {
                                "volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}
                            },
                        }
                    ],
                }
            },
        },
    },
}
LEADER_WORKER_PATCH: JSON = {
    "spec": {
        "leaderWorkerTemplate": {
            "$patch": "replace",
            "leaderTemplate": {
                "metadata": {"labels": {"role": "leader"}},
                "spec": {
                    "containers": [
                        {
                            "env": [
                                {
                                    "name": "CPU",
                                    "valueFrom": {
                                        "resourceFieldRef": {
                                            "divisor": "0",
                                            "resource": "limits.cpu",
                                        }
                                    },
                                }
                            ],
                            "image": "busybox",
                            "name": "leader",
                            "resources": {},
                        }
                    ],
                    "initContainers": [{"image": "busybox", "name": "init", "resources": {}}],
                },
            },
            "restartPolicy": "RecreateGroupOnPodRestart",
            "size": 3,
            "workerTemplate": {
                "metadata": {},
                "spec": {
                    "containers": [{"image": "busybox", "name": "worker", "resources": {}}],
                    "volumes": [
                        {
                            "ephemeral": {
                                "volumeClaimTemplate": {
                                    "metadata": {},
                                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {}},
                                }
                            },
                            "name": "scratch",
                        }
                    ],
                },
            },
        },
        "networkConfig": {"$patch": "replace", "subdomainPolicy": "Shared"},
    }
}

CASES = [
    # (manifest, the patch upstream hashes for it, that hash)
    (PAUSE_MANIFEST, PAUSE_PATCH, "7b45f4f98c"),
    (SAMPLE_MANIFEST, SAMPLE_PATCH, "5bc6dc849d"),
    (LEADER_WORKER_MANIFEST, LEADER_WORKER_PATCH, "5cdc7654f"),
]


@pytest.mark.parametrize("manifest, patch, pinned", CASES, ids=["pause", "sample", "both"])
def test_revision_hash_matches_upstream(manifest: JSON, patch: JSON, pinned: str) -> None:
    expected = upstream_hash(patch)
    assert expected == pinned, "the independent rendering drifted"
    stored = default_object(copy.deepcopy(manifest))
    assert snapshot_key(stored) == expected


def test_template_metadata_and_container_resources_are_stored() -> None:
    stored = default_object(copy.deepcopy(LEADER_WORKER_MANIFEST))
    lwt = stored["spec"]["leaderWorkerTemplate"]
    worker, leader = lwt["workerTemplate"], lwt["leaderTemplate"]
    assert worker["metadata"] == {}
    assert leader["metadata"] == {"labels": {"role": "leader"}}
    assert worker["spec"]["containers"][0]["resources"] == {}
    assert leader["spec"]["initContainers"][0]["resources"] == {}
    ref = leader["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]
    assert ref == {"resource": "limits.cpu", "divisor": "0"}


def test_given_members_are_kept() -> None:
    manifest = copy.deepcopy(SAMPLE_MANIFEST)
    worker = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["metadata"] = {"annotations": {"a": "b"}}
    env = {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "x", "divisor": "1Mi"}}}
    worker["spec"]["containers"][0]["env"] = [env]
    stored = default_object(manifest)["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert stored["metadata"] == {"annotations": {"a": "b"}}
    container = stored["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "100m"}, "requests": {"cpu": "50m"}}
    assert container["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"] == "1Mi"


def test_volume_claim_templates_get_struct_members() -> None:
    manifest = copy.deepcopy(PAUSE_MANIFEST)
    manifest["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = [
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    ]
    stored = default_object(manifest)
    (claim,) = stored["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
    assert claim == {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {}},
        "status": {},
    }


def test_filling_is_idempotent() -> None:
    once = default_object(copy.deepcopy(LEADER_WORKER_MANIFEST))
    assert default_object(copy.deepcopy(once)) == once
