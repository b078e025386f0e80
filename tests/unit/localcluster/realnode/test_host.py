"""What the real node sweeps from the machine: the mounts below its folders (and any
kubelet's, even a killed run's in another work dir) deepest first, and only the NAT rules
of its own pod network."""

from __future__ import annotations

from pathlib import Path

from lws_localcluster.realnode.host import mounts_under, pod_nat_rules


def _mountinfo(*points: str) -> str:
    return "\n".join(
        f"{i} 1 0:{i} / {p} rw,relatime - tmpfs tmpfs rw" for i, p in enumerate(points, 30)
    )


def test_mounts_below_the_roots_and_any_kubelet_root_deepest_first(tmp_path: Path) -> None:
    root = tmp_path / "node"
    info = _mountinfo(
        "/",
        str(root),
        f"{root}/a",
        f"{root}/a/b",
        f"{tmp_path}/node2/x",
        "/tmp/old-run/realnode/kubelet/pods/uid/volumes/token",
        "/proc",
    )
    found = mounts_under([root], info)
    assert found == [
        "/tmp/old-run/realnode/kubelet/pods/uid/volumes/token",
        f"{root}/a/b",
        f"{root}/a",
        str(root),
    ]


def test_a_mount_point_with_a_space_is_read_whole(tmp_path: Path) -> None:
    info = _mountinfo(f"{tmp_path}/with\\040space")
    assert mounts_under([tmp_path], info) == [f"{tmp_path}/with space"]


SAVED = """*nat
:POSTROUTING ACCEPT [0:0]
:CNI-0a1b2c ACCEPT [0:0]
:CNI-ffff ACCEPT [0:0]
-A POSTROUTING -s 10.214.0.5 -m comment --comment "name: \\"lws-pods\\" id: \\"a\\"" -j CNI-0a1b2c
-A POSTROUTING -s 10.88.0.5/32 -m comment --comment "name: \\"other\\" id: \\"def\\"" -j CNI-ffff
-A CNI-0a1b2c -d 10.214.0.0/16 -j ACCEPT
COMMIT
"""


def test_only_the_node_network_nat_rules_are_taken_and_each_deletes_exactly() -> None:
    deletions, chains = pod_nat_rules(SAVED)
    assert chains == {"CNI-0a1b2c"}
    assert deletions == [
        [
            "-D",
            "POSTROUTING",
            "-s",
            "10.214.0.5",
            "-m",
            "comment",
            "--comment",
            'name: "lws-pods" id: "a"',
            "-j",
            "CNI-0a1b2c",
        ]
    ]
