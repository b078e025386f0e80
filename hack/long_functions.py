"""Lint: every function in src/ longer than 60 lines (docstring included) needs a
comment line right above its `def` (or its decorators) that says why it is one piece.

Usage: python hack/long_functions.py [root ...]   (default: src/leaderworkerset)
Exits 1 and lists the offenders when any lacks that comment.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIMIT = 60


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def long_functions(path: Path) -> list[tuple[int, str, int, bool]]:
    """(line, name, length, justified) of each function over the limit in `path`."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length <= LIMIT:
            continue
        above = _first_line(node) - 2
        justified = above >= 0 and lines[above].strip().startswith("#")
        out.append((node.lineno, node.name, length, justified))
    return out


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("src/leaderworkerset")]
    bad = 0
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for line, name, length, justified in long_functions(path):
                if not justified:
                    bad += 1
                    print(f"{path}:{line}: {name} is {length} lines with no comment saying why")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
