"""Upstream's template revision hash, written out independently of our code, and
kubectl-style manifests with the patch upstream hashes for each (written by hand as
Go encodes it after its webhook's typed round trip)."""

from __future__ import annotations

import json
from typing import Any

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
