"""Work spread over worker processes, in order, with a bounded number of batches in flight.

The main process reads and writes (files, PostgreSQL); workers do the
decoding and encoding.  At most ``2 * jobs`` batches are out at a time, so
memory stays bounded whatever the size of the database.  ``jobs == 1`` runs
everything in this process, with no pool at all.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, TypeVar

from . import CommandError
from .signals import sigint_blocked

T = TypeVar("T")
R = TypeVar("R")

BATCH_RECORDS = 256
BATCH_BYTES = 1 << 20


class _Executor(ProcessPoolExecutor):
    if not hasattr(ProcessPoolExecutor, "_adjust_process_count") and hasattr(
        ProcessPoolExecutor, "_adjust_process_count_cpython"
    ):
        # PyPy 7.3.11's stdlib renamed this method but still calls it by the
        # old name for "spawn" pools (AttributeError at the first submit).
        def _adjust_process_count(self) -> None:
            self._adjust_process_count_cpython()  # type: ignore[attr-defined]


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# From how many bytes of records on several processes are faster than one (smaller: --jobs 1).  A worker
# takes 0.1-0.2 s to start, which only pays where there is enough work: measured with --jobs 1 and 2 on
# 1, 5, 8, 21 and 82 MB FileStorages (docs/commands.md, "Processes").  verify does the most per record,
# pg-export and pg-import share the work with PostgreSQL; load reads JSON Lines, about twice the size.
PARALLEL_FROM = {"verify": 2 << 20, "pg-export": 16 << 20, "pg-import": 16 << 20, "stats": 64 << 20,
                 "dump": 64 << 20, "load": 128 << 20}


def auto_jobs(command: str, size: Optional[int]) -> int:
    """The default --jobs: the cores for size bytes of records (None: not known) from PARALLEL_FROM on,
    else 1."""
    if size is not None and size < PARALLEL_FROM.get(command, 0):
        return 1
    return default_jobs()


def batched(items: Iterable[T], size_of: Callable[[T], int], max_items: int = BATCH_RECORDS,
            max_bytes: int = BATCH_BYTES) -> Iterator[List[T]]:
    """Lists of consecutive items, each at most max_items long and about max_bytes big."""
    batch: List[T] = []
    size = 0
    for item in items:
        batch.append(item)
        size += size_of(item)
        if len(batch) >= max_items or size >= max_bytes:
            yield batch
            batch = []
            size = 0
    if batch:
        yield batch


def ordered_map(function: Callable[[Any], R], batches: Iterable[Any], jobs: int,
                initializer: Optional[Callable[..., None]] = None, initargs: Sequence[Any] = ()) -> Iterator[R]:
    """function(batch) for each batch, in order; in jobs worker processes when jobs > 1.

    A worker's exception is raised here, at its batch.  The workers are
    started with "spawn" on every platform: the same behaviour everywhere,
    and no fork of a process that holds open files and threads.
    """
    if jobs <= 1:
        if initializer is not None:
            initializer(*initargs)
        for batch in batches:
            yield function(batch)
        return
    executor = _Executor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_worker, initargs=(initializer, tuple(initargs)))
    pending: collections.deque = collections.deque()
    try:
        for batch in batches:
            # A worker started meanwhile inherits the blocked SIGINT: Ctrl-C, which reaches the whole
            # process group, never interrupts a worker still importing (its traceback, and a pool left
            # waiting for it: the command hung).
            with sigint_blocked():
                pending.append(executor.submit(function, batch))
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise CommandError("a worker process died (out of memory, or killed)") from None
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _start_worker(initializer: Optional[Callable[..., None]], initargs: Sequence[Any]) -> None:
    # Ctrl-C reaches the whole process group: the main process stops the
    # pool, so workers must not die with tracebacks of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def map_records(records: Iterable[Any], function: Callable[[List[Any]], R], jobs: int, progress: Any,
                prepare: Callable[[Any], Any] = lambda r: (r.oid, r.tid, r.data),
                initializer: Optional[Callable[..., None]] = None, initargs: Sequence[Any] = (),
                counted: Callable[[Any], bool] = lambda r: True) -> Iterator[R]:
    """function(batch) over batches of prepare(record), in order, with progress counted in records (the
    items counted() says are records, not a transaction's line).

    Each record has ``data`` (its size decides the batches) and ``position``
    (0..1 through its source, for the progress percentage).
    """
    sizes: collections.deque = collections.deque()

    def batches() -> Iterator[List[Any]]:
        for batch in batched(records, lambda r: len(r.data)):
            sizes.append((sum(map(counted, batch)), batch[-1].position))
            yield [prepare(r) for r in batch]

    done = 0
    for result in ordered_map(function, batches(), jobs, initializer, initargs):
        count, position = sizes.popleft()
        done += count
        progress.update(done, position)
        yield result
