"""glibc's thresholds fixed at start, unless the environment sets them."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys

import pytest

from leaderworkerset.runtime import allocator

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="glibc 2.33 or later (mallinfo2)",
)


# Run in a fresh interpreter: in a heap that already holds a free block of the size, glibc
# reuses it whatever the thresholds say, so only a clean heap shows where the block goes.
PROBE = """
import ctypes, sys
from leaderworkerset.runtime import allocator

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
if sys.argv[1] == "fixed":
    allocator.fix_malloc_thresholds({})
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(4 << 20)
print(libc.mallinfo2().hblks - before)
"""


def mapped_after_a_free(mode: str) -> int:
    """1 when a 4 MiB block, asked for after one was freed, is mapped (and goes back to
    the system on free), 0 when it comes from the heap."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        check=True,
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")},
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
    )
    return int(done.stdout.strip())


def test_every_threshold_the_environment_leaves_is_fixed() -> None:
    assert allocator.fix_malloc_thresholds({}) == ["malloc_mmap_threshold", "malloc_trim_threshold"]
    assert allocator.fix_malloc_thresholds({"MALLOC_MMAP_THRESHOLD_": "65536"}) == [
        "malloc_trim_threshold"
    ]
    tunables = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=262144"}
    assert allocator.fix_malloc_thresholds(tunables) == ["malloc_mmap_threshold"]


def test_a_large_block_is_still_mapped_after_another_was_freed() -> None:
    """Left to glibc, freeing a mapped block raises the threshold past its size and the
    next one comes from the heap, which keeps it: a relist's page bodies."""
    assert mapped_after_a_free("adaptive") == 0
    assert mapped_after_a_free("fixed") == 1
