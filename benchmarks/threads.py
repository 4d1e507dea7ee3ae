"""Throughput of one thread against several, for a function that may release the GIL.

The setup, the same for every contender: k threads are started and wait at
a barrier; when the last arrives, the clock starts (the barrier's action)
and each thread makes one whole pass over the set (every record once); the
clock stops when the main thread has joined them all. Throughput is k x
records / that time, so a codec that runs in parallel on k free cores gets
k times its one-thread records/s, one that holds the GIL gets 1x at best.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Callable, Dict, List, Sequence

from timing import interleaved


def run_threads(work: Callable[[], Any], threads: int) -> float:
    """Seconds from the barrier's release until every one of threads calls of work() has returned."""
    started: List[float] = []
    barrier = threading.Barrier(threads, action=lambda: started.append(time.perf_counter()))
    errors: List[BaseException] = []

    def body() -> None:
        barrier.wait()
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(exc)

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started[0]
    if errors:
        raise errors[0]
    return elapsed


def thread_throughput(
    functions: Dict[str, Callable[[Any], Any]], items: Sequence[Any], counts: Sequence[int], budget: float, rounds: int
) -> Dict[str, Dict[int, float]]:
    """Records per second of each function with each thread count, all timed in alternation."""
    fns = {}
    for name, fn in functions.items():
        whole_pass = partial(lambda f, xs: [f(x) for x in xs], fn, items)
        for k in counts:
            fns[f"{name}\0{k}"] = partial(run_threads, whole_pass, k)
    best = interleaved(fns, budget, rounds)
    out: Dict[str, Dict[int, float]] = {name: {} for name in functions}
    for key, seconds in best.items():
        name, k = key.split("\0")
        out[name][int(k)] = int(k) * len(items) / seconds
    return out
