"""glibc's malloc set for a manager that lives for weeks and reads its caches again.

A relist (after a compaction or an API-server restart) reads every cached resource
again, page by page. Each page's response body is a few hundred KiB to a few MiB. glibc
serves a block that large with mmap and gives it back on free, but the first such free
raises its mmap threshold (up to 32 MiB) and its trim threshold with it: from then on
the bodies come from the heap, and the heap keeps what they left behind. Measured on a
local cluster (bench/relist_memory.py, 2,000 pods, docs/soak.md): +6 MiB after the
first relist, creeping after every other, against +1 MiB and flat with the thresholds
fixed at glibc's own starting values. Fixing them turns that adaptation off and
nothing else.

An operator's own MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ (or the same in
GLIBC_TUNABLES) wins; on a libc other than glibc this does nothing. The cost is an
mmap and munmap per block of 128 KiB or more, a response body or a large JSON value.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from collections.abc import Mapping

log = logging.getLogger(__name__)

# mallopt(3) parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's defaults before any adaptation (DEFAULT_MMAP_THRESHOLD_MIN, DEFAULT_TRIM_THRESHOLD).
THRESHOLD_BYTES = 128 * 1024

# Each parameter with the environment variable and the glibc tunable that set it.
_SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, "glibc.malloc.mmap_threshold"),
    "MALLOC_TRIM_THRESHOLD_": (M_TRIM_THRESHOLD, "glibc.malloc.trim_threshold"),
}


def fix_malloc_thresholds(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Fix glibc's mmap and trim thresholds (those not set by the environment); the
    names of the settings made."""
    if platform.libc_ver()[0] != "glibc":
        return []
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return []
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    made = []
    tunables = environ.get("GLIBC_TUNABLES", "")
    for variable, (parameter, tunable) in _SETTINGS.items():
        if variable in environ or tunable in tunables:
            continue
        # mallopt answers 1 on success, 0 on error.
        if mallopt(parameter, THRESHOLD_BYTES) == 1:
            made.append(variable.rstrip("_").lower())
        else:
            log.debug("mallopt(%d, %d) refused", parameter, THRESHOLD_BYTES)
    return made
