"""How much of a scan's decode time is the cycle collector walking the results kept so far.

    python benchmarks/collector.py [SET]      (default: wikipedia)

Times pickle (the C unpickler with persistent_load, as ZODB calls it) and the
Cython twin's decode_zodb_record over a whole scan, with the results kept in
a list (as compare.py and report.py keep them) or dropped per record, with the
collector on and off; minimum of 15 rounds each, contenders alternating.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Callable, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baseline  # noqa: E402
import datasets  # noqa: E402
from zodb_json_codec import _impl  # noqa: E402


def per_record(fn: Callable, records: List[bytes], keep: bool) -> float:
    start = time.perf_counter()
    if keep:
        results = [fn(r) for r in records]
        elapsed = time.perf_counter() - start
        assert len(results) == len(records)  # freed only now, after the clock stopped (as in report.py)
        return elapsed / len(records)
    for r in records:
        fn(r)
    return (time.perf_counter() - start) / len(records)


def main() -> None:
    records = datasets.load(sys.argv[1] if len(sys.argv) > 1 else "wikipedia")
    compiled = _impl.import_twin("cython")[0].decode_zodb_record
    print("| results | collector | pickle | compiled | ratio |\n|---|---|---|---|---|")
    for collector in (True, False):
        (gc.enable if collector else gc.disable)()
        for keep in (True, False):
            best = {"pickle": float("inf"), "cython": float("inf")}
            for _ in range(15):
                for name, fn in (("pickle", baseline.decode_zodb_record), ("cython", compiled)):
                    best[name] = min(best[name], per_record(fn, records, keep))
            print(f"| {'kept in a list' if keep else 'dropped per record'} | {'on' if collector else 'off'} "
                  f"| {best['pickle'] * 1e6:.1f} µs | {best['cython'] * 1e6:.1f} µs "
                  f"| {best['cython'] / best['pickle']:.2f} |")
    gc.enable()


if __name__ == "__main__":
    main()
