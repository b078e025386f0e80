"""The mutation score per module of the last `make mutation` run, as a Markdown table
(the form docs/testing.md records it in).

Reads mutmut's per-module result files (mutants/<path>.py.meta) and names each
outcome as mutmut does. The score counts a timeout as a kill (the mutant made the
tests hang, which they noticed) and a mutant that no test reaches as a survivor.

Usage: python hack/mutation_scores.py [mutants-dir]   (default: mutants)
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

COLUMNS = ("killed", "survived", "timeout", "no tests")


def outcomes(meta: Path) -> Counter[str]:
    codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
    return Counter(status_by_exit_code[code] for code in codes.values())


def row(name: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    caught = counts["killed"] + counts["timeout"]
    other = total - sum(counts[c] for c in COLUMNS)
    score = f"{100 * caught / total:.1f}%" if total else "-"
    cells = [name, *(str(counts[c]) for c in COLUMNS), str(other), str(total), score]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "mutants")
    metas = sorted((root / "src").rglob("*.py.meta"))
    if not metas:
        print(f"no mutmut results under {root}/src: run `make mutation` first", file=sys.stderr)
        return 1
    print("| module | " + " | ".join(COLUMNS) + " | other | total | score |")
    print("|---" * (len(COLUMNS) + 4) + "|")
    overall: Counter[str] = Counter()
    for meta in metas:
        counts = outcomes(meta)
        if not counts:
            continue  # nothing to mutate (an empty __init__.py)
        overall.update(counts)
        module = meta.relative_to(root / "src").with_suffix("").with_suffix("")
        print(row(str(module).replace("/", "."), counts))
    print(row("**all**", overall))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
