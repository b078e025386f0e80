"""glibc's thresholds fixed at start, unless the environment sets them."""

from __future__ import annotations

import ctypes
import platform

import pytest

from leaderworkerset.runtime import allocator

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


class MallinfoTwo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks")] + [
        (name, ctypes.c_size_t)
        for name in ("hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


def mapped_blocks() -> int:
    """Blocks glibc holds with mmap now (mallinfo2's hblks)."""
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallinfoTwo
    return int(mallinfo2().hblks)


def test_every_threshold_the_environment_leaves_is_fixed() -> None:
    assert allocator.fix_malloc_thresholds({}) == ["malloc_mmap_threshold", "malloc_trim_threshold"]
    assert allocator.fix_malloc_thresholds({"MALLOC_MMAP_THRESHOLD_": "65536"}) == [
        "malloc_trim_threshold"
    ]


def test_a_large_block_is_still_mapped_after_another_was_freed() -> None:
    """Without the fix, freeing a mapped 1 MiB block raises the threshold past 1 MiB and
    the next one comes from the heap, which keeps it (the relist's page bodies)."""
    allocator.fix_malloc_thresholds({})
    malloc = ctypes.CDLL(None).malloc
    free = ctypes.CDLL(None).free
    malloc.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    first = malloc(1 << 20)
    free(first)
    before = mapped_blocks()
    second = malloc(1 << 20)
    try:
        assert mapped_blocks() == before + 1
    finally:
        free(second)
