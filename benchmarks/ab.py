"""Before/after: the Cython twin of two source trees timed on the report's sets, in alternating processes.

    python benchmarks/ab.py BEFORE AFTER [--only SET ...] [--ops OP ...] [--processes N]
                            [--rounds N] [--budget SECONDS]

BEFORE and AFTER are checkouts of this project with their Cython twins built
in place (``python setup.py build_ext --inplace``; ``git worktree add`` makes
one of an older commit).  Two builds cannot share one process (they have one
import name), so each process imports one tree's twins (PYTHONPATH=TREE/src)
and times every row (a set and an operation, as in benchmarks/report.py);
the processes alternate, BEFORE, AFTER, AFTER, BEFORE..., and each row keeps
its best time over all of a tree's processes.  The k-th process of each tree
gets PYTHONHASHSEED=k: str hashes decide dict probing and the decoder's table
of shared texts, and with a random seed one process in a few ran a row up to
1.6 times slower than the next (wikipedia decode), whichever tree it held.
The table gives both and AFTER/BEFORE; rows more than --limit slower are
marked.  Both trees' records come from this checkout's benchmarks/datasets.py.

Operations: decode (record -> dict), pg_json (record -> JSON text), encode
(the tree's own decoded dict -> record), from_pg_json (the tree's pg_json
text as UTF-8 bytes -> record).  For small differences on one row,
benchmarks/instructions.py in both trees is steadier than time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

OPS = ("decode", "pg_json", "encode", "from_pg_json")
DEFAULT_SETS = ("simple_flat_dict", "nested_dict", "large_flat_dict", "bytes_in_state", "special_types",
                "btree_small", "btree_length", "scalar_string", "wide_dict", "deep_nesting", "wikipedia", "public")


def _pass(name: str, op: str) -> Callable[[], Any]:
    """One pass of op over the set's records, with this process's Cython twin (as instructions.py runs it)."""
    from instructions import _records, operation

    f, items = operation(op, "cython"), _records(name, op, "cython")

    def run():
        for x in items:
            f(x)
    return run


def _child(args) -> None:
    """Seconds per record of every row, as JSON on stdout."""
    import datasets
    from timing import interleaved

    times: Dict[str, float] = {}
    for name in args.only:
        count = len(list(datasets.load(name)))
        for op in args.ops:
            best = interleaved({"row": _pass(name, op)}, args.budget, args.rounds)["row"]
            times[f"{name} {op}"] = best / count
    json.dump(times, sys.stdout)


def _run(tree: Path, args, seed: int) -> Dict[str, float]:
    command = [sys.executable, __file__, "--child", "--only", *args.only, "--ops", *args.ops,
               "--rounds", str(args.rounds), "--budget", str(args.budget)]
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PYTHONHASHSEED=str(seed))
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", nargs="?", type=Path)
    ap.add_argument("after", nargs="?", type=Path)
    ap.add_argument("--only", nargs="+", default=list(DEFAULT_SETS), metavar="SET")
    ap.add_argument("--ops", nargs="+", default=["decode", "pg_json", "encode"], choices=OPS, metavar="OP")
    ap.add_argument("--processes", type=int, default=3, help="processes per tree (default 3)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds per row in each process (default 9)")
    ap.add_argument("--budget", type=float, default=0.1, help="seconds per row and round, about (default 0.1)")
    ap.add_argument("--limit", type=float, default=1.03, help="AFTER/BEFORE above this is marked (default 1.03)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    if args.before is None or args.after is None:
        ap.error("BEFORE and AFTER are required")
    best: Dict[str, Dict[str, float]] = {"before": {}, "after": {}}
    for k in range(args.processes):
        for side, tree in (("before", args.before), ("after", args.after))[::1 if k % 2 == 0 else -1]:
            for row, t in _run(tree, args, seed=k).items():
                best[side][row] = min(best[side].get(row, t), t)
    print(f"{'row':32} {'before µs':>10} {'after µs':>10} {'after/before':>13}")
    worst = 0.0
    for row, before in best["before"].items():
        ratio = best["after"][row] / before
        worst = max(worst, ratio)
        mark = "  slower" if ratio > args.limit else ""
        print(f"{row:32} {before * 1e6:10.2f} {best['after'][row] * 1e6:10.2f} {ratio:13.3f}{mark}")
    print(f"worst after/before: {worst:.3f} (best of {args.rounds} rounds in {args.processes} processes per tree, "
          f"alternating)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
