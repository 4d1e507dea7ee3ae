"""Throughput of one thread against several, for a function that may release the GIL.

The setup, the same for every contender: k threads are started and wait at
a barrier; when the last arrives, the clock starts (the barrier's action)
and each thread makes one whole pass over the set (every record once); the
clock stops when the main thread has joined them all. Throughput is k x
records / that time, so a codec that runs in parallel on k free cores gets
k times its one-thread records/s, one that holds the GIL gets 1x at best.

Beside it, the process's CPU time over the wall time of the same (fastest)
call: with k threads running at once it is about k times the one-thread
value, with the GIL serialising them it stays at that value. A one-thread
value well below 1 means the machine's other load took the core for part
of the time (on a shared machine, the 2-thread ratio is then no measure of
what the codec can do).

And the machine's own ceiling: the same passes made by k processes at once
(forked, so nothing is shared but the machine). No k threads can do better
than k processes; on the shared 2-core machines two processes have given
1.5-1.95x one, from run to run.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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


def _keeping(fn: Callable[[Any], Any], items: Sequence[Any]) -> Callable[[], Any]:
    """A pass keeping every result until it ends, as a storage keeps a transaction's rows until its vote."""
    return lambda: [fn(x) for x in items]


def _dropping(fn: Callable[[Any], Any], items: Sequence[Any]) -> Callable[[], Any]:
    """A pass dropping each result as soon as it is made, as a storage writing row by row."""
    def work() -> None:
        for x in items:
            fn(x)
    return work


class ThreadedPass:
    """One call: k threads each make a whole pass over items; remembers (wall, CPU) seconds of every call."""

    def __init__(self, fn: Callable[[Any], Any], items: Sequence[Any], threads: int, keep: bool = True) -> None:
        self.work = (_keeping if keep else _dropping)(fn, items)
        self.threads = threads
        self.samples: List[Tuple[float, float]] = []

    def __call__(self) -> None:
        cpu = time.process_time()
        wall = run_threads(self.work, self.threads)
        self.samples.append((wall, time.process_time() - cpu))

    def cpu_per_wall(self) -> float:
        """CPU time over wall time of the fastest call."""
        wall, cpu = min(self.samples)
        return cpu / wall


def thread_throughput(
    functions: Dict[str, Callable[[Any], Any]], items: Sequence[Any], counts: Sequence[int], budget: float, rounds: int,
    keep: bool = True,
) -> Dict[str, Dict[int, Dict[str, float]]]:
    """{name: {k: {"records/s": ..., "cpu/wall": ...}}} for each function and thread count, timed in alternation.

    keep: each pass keeps its results until it ends (else drops each at once).  Kept results of large text
    are fresh memory for every pass (the C allocator gives the last pass's back to the system when it is
    freed), and a page fault costs both codecs the same whatever they do: results kept measure the
    kernel's page faults as much as the codec.
    """
    calls = {(name, k): ThreadedPass(fn, items, k, keep) for name, fn in functions.items() for k in counts}
    best = interleaved({f"{name}\0{k}": call for (name, k), call in calls.items()}, budget, rounds)
    out: Dict[str, Dict[int, Dict[str, float]]] = {name: {} for name in functions}
    for (name, k), call in calls.items():
        out[name][k] = {"records/s": k * len(items) / best[f"{name}\0{k}"], "cpu/wall": call.cpu_per_wall()}
    return out


def _passes_for(fn: Callable[[Any], Any], items: Sequence[Any], seconds: float, start: Any, out: Any) -> None:
    """A child's part of process_throughput: whole passes until seconds are up; puts (records, elapsed)."""
    start.wait()
    t0 = time.perf_counter()
    records = 0
    while True:
        for x in items:
            fn(x)
        records += len(items)
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            out.put((records, elapsed))
            return


def process_throughput(fn: Callable[[Any], Any], items: Sequence[Any], counts: Sequence[int], seconds: float,
                       rounds: int = 3) -> Optional[Dict[int, float]]:
    """{k: records/s of k forked processes running passes at once} (the best of rounds), or None without fork."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("fork")
    best: Dict[int, float] = {}
    for _ in range(rounds):
        for k in counts:
            start = context.Barrier(k)
            out = context.Queue()
            children = [context.Process(target=_passes_for, args=(fn, items, seconds, start, out)) for _ in range(k)]
            for child in children:
                child.start()
            done = [out.get() for _ in children]
            for child in children:
                child.join()
            rate = sum(records / elapsed for records, elapsed in done)
            best[k] = max(best.get(k, 0.0), rate)
    return best
