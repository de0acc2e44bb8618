"""``python -m bench [append] [verify] [hooks] ...``: run the named benchmarks (default: all)."""

from __future__ import annotations

import sys

from bench import append, canonical, coldstart, decide, export, guard, hooks, verify

BENCHES = {
    "append": append.main,
    "canonical": canonical.main,
    "verify": verify.main,
    "decide": decide.main,
    "guard": guard.main,
    "export": export.main,
    "hooks": hooks.main,
    "coldstart": coldstart.main,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}",
              file=sys.stderr)  # fmt: skip
        return 2
    for name in names:
        BENCHES[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
