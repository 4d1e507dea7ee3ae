"""How the report times: contenders in alternation, each keeping its minimum; and the memcpy baseline.

loop_size() and interleaved() were report.py's from the start (the Rust
codec's comparison script times the same way), moved here to be shared by
its parts.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Dict, List, Sequence

#: What the memcpy rows time, as the report states it.
MEMCPY_NOTE = "memcpy: ctypes.memmove of each input's bytes into one preallocated buffer (one copy, no allocation)"


def loop_size(fn: Callable[[], Any], budget: float) -> int:
    """Calls per timed loop so that one loop takes about budget/10 seconds."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > budget / 10 or n >= 1 << 20:
            return n
        n *= 2


def interleaved(fns: Dict[str, Callable[[], Any]], budget: float, rounds: int = 15) -> Dict[str, float]:
    """Minimum seconds per call for each fn, timing them in alternation.

    Alternating the contenders within every round spreads the machine's
    noise evenly over them, so their ratio is steadier than their times.
    """
    sizes = {k: loop_size(f, budget) for k, f in fns.items()}
    best = {k: float("inf") for k in fns}
    order = list(fns)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            f, n = fns[k], sizes[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best[k] = min(best[k], (time.perf_counter() - t0) / n)
    return best


def memcpy_pass(items: Sequence[bytes]) -> Callable[[], List[Any]]:
    """A pass copying every item once, shaped like the contenders' passes (a list comprehension).

    The bound for anything that must read every byte of its input: a
    contender's MB/s over this one's says how far it is from it.
    """
    buffer = ctypes.create_string_buffer(max((len(x) for x in items), default=0) or 1)
    memmove = ctypes.memmove
    return lambda: [memmove(buffer, x, len(x)) for x in items]


def mb_per_s(total_bytes: int, seconds: float) -> float:
    """Throughput in MB/s (10**6 bytes), seconds being the time of one pass over total_bytes."""
    return total_bytes / seconds / 1e6
