"""How the report times: contenders in alternation, each keeping its minimum; and the memcpy baseline.

loop_size() and interleaved() were report.py's from the start (the Rust
codec's comparison script times the same way), moved here to be shared by
its parts.
"""

from __future__ import annotations

import ctypes
import json
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

#: What the memcpy rows time, as the report states it.
MEMCPY_NOTE = "memcpy: ctypes.memmove of each input's bytes into one preallocated buffer (one copy, no allocation)"
#: What the new-copy rows time: the least a function that returns a new bytes object per input can do.
NEW_COPY_NOTE = ("new copy: each input's bytes copied into a new bytes object (an allocation and a copy, what any"
                 " function returning its result as new bytes pays at least)")


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


def interleaved(fns: Dict[str, Callable[..., Any]], budget: float, rounds: int = 15,
                fresh: Optional[Callable[[], Any]] = None) -> Dict[str, float]:
    """Minimum seconds per call for each fn, timing them in alternation.

    Alternating the contenders within every round spreads the machine's
    noise evenly over them, so their ratio is steadier than their times.
    With fresh, each fn takes one argument and every call gets a new one
    from fresh(), made before the clock starts: a storage's driver hands
    over a new str per row, whose UTF-8 CPython has not computed and kept.
    """
    sizes = {k: loop_size(f if fresh is None else (lambda f=f: f(fresh())), budget) for k, f in fns.items()}
    best = {k: float("inf") for k in fns}
    order = list(fns)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            best[k] = min(best[k], _timed_loop(fns[k], sizes[k], fresh))
    return best


def _timed_loop(fn: Callable[..., Any], n: int, fresh: Optional[Callable[[], Any]]) -> float:
    """Seconds per call of n calls of fn (each with its own fresh() argument, made untimed)."""
    if fresh is None:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n
    args = [fresh() for _ in range(n)]
    t0 = time.perf_counter()
    for arg in args:
        fn(arg)
    return (time.perf_counter() - t0) / n


#: About how much JSON text interleaved_fresh() turns into values at a time: their objects (a few times the text)
#: stay in a core's 1-2 MiB L2 cache, as one record's do between a storage's json.loads and its encode.
FRESH_CHUNK_BYTES = 1 << 16


def interleaved_fresh(fns: Dict[str, Callable[[List[Any]], Any]], texts: Sequence[str], rounds: int = 15,
                      make: Callable[[str], Any] = json.loads,
                      chunk_bytes: int = FRESH_CHUNK_BYTES) -> Dict[str, float]:
    """Minimum seconds per pass over texts for each fn, every call on a value make() has just made.

    A storage's load path encodes what json.loads made a moment before, so neither a str's kept UTF-8 (made
    by an earlier pass) nor memory no cache holds any more (values made long before the clock starts) belongs in
    the time.  The texts are cut into chunks of about chunk_bytes (a small set repeated up to that); each round,
    each fn gets new values of each chunk, made just before that chunk is timed; a pass's time is the sum of
    each chunk's best time, divided by the copies of the set in the chunks.
    """
    chunks, copies = _fresh_chunks(texts, chunk_bytes)
    best = {k: [float("inf")] * len(chunks) for k in fns}
    order = list(fns)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            for i, chunk in enumerate(chunks):
                values = [make(text) for text in chunk]
                t0 = time.perf_counter()
                fns[k](values)
                best[k][i] = min(best[k][i], time.perf_counter() - t0)
    return {k: sum(times) / copies for k, times in best.items()}


def _fresh_chunks(texts: Sequence[str], chunk_bytes: int) -> Tuple[List[List[str]], int]:
    """interleaved_fresh()'s chunks of texts, and how many copies of texts they hold."""
    total = sum(map(len, texts)) or 1
    if total < chunk_bytes:
        copies = max(1, chunk_bytes // total)
        return [list(texts) * copies], copies
    chunks: List[List[str]] = [[]]
    size = 0
    for text in texts:
        if chunks[-1] and size + len(text) > chunk_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(text)
        size += len(text)
    return chunks, 1


def memcpy_pass(items: Sequence[bytes]) -> Callable[[], List[Any]]:
    """A pass copying every item once, shaped like the contenders' passes (a list comprehension).

    The bound for anything that must read every byte of its input: a
    contender's MB/s over this one's says how far it is from it.
    """
    buffer = ctypes.create_string_buffer(max((len(x) for x in items), default=0) or 1)
    memmove = ctypes.memmove
    return lambda: [memmove(buffer, x, len(x)) for x in items]


def new_copy_pass(fresh: Sequence[Any]) -> List[bytes]:
    """A pass making a new bytes object of each fresh row's data (all but its last byte, so that a slice copies).

    memcpy_pass() writes into one buffer the caches already hold; a function returning new bytes also gets new
    memory for each result, which the caches do not hold and a large result may have to fault in.  This is that
    part alone: no contender returning new bytes can be faster than it.
    """
    return [row.data[:-1] for row in fresh]


def mb_per_s(total_bytes: int, seconds: float) -> float:
    """Throughput in MB/s (10**6 bytes), seconds being the time of one pass over total_bytes."""
    return total_bytes / seconds / 1e6
