"""hack/images' modules for the tests, loaded from their files (hack/ is no package,
and the names stay out of sys.path so they cannot shadow anything)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.toolkit.paths import REPO

FOLDER = REPO / "hack" / "images"


def load(name: str) -> ModuleType:
    qualified = f"lws_hack_images_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, FOLDER / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


oci = load("oci")
rootfs = load("rootfs")
