"""Many threads calling one twin at once get exactly what one thread gets (no shared mutable state), for each twin."""

from __future__ import annotations

import functools
import json
import sys
import threading
from typing import Any, Callable, List, Tuple

import pytest
from corpus import NAMES, row_record, vectors
from helpers import DECODERS, large_text_records
from strictcompare import describe, outcome, outcome_diff

pytestmark = pytest.mark.slow  # the corpora from 8 threads

THREADS = 8
ROUNDS = 2
# Every EVERY-th corpus record: both corpora, all sizes, a few seconds per round for the Python twin.
EVERY = 8

Call = Tuple[str, Callable[[Any], Any], Any]


def workload(impl) -> List[Call]:
    """(label, function, argument): corpus records through all eight functions, and inputs that fail.

    The encoders get what this twin decoded, computed once here: all
    threads then share these argument objects, as callers may.
    """
    calls: List[Call] = []
    for name in NAMES:
        for row in vectors(name)[::EVERY]:
            data, oid = row_record(row), f"{name} {row['oid']}"
            calls += [(f"{oid} {fn}", getattr(impl, fn), data) for fn in DECODERS]
            module, cls, text, _ = impl.decode_zodb_record_for_pg_json(data)
            calls += [(f"{oid} encode_zodb_record", impl.encode_zodb_record, impl.decode_zodb_record(data)),
                      (f"{oid} encode_zodb_record of the JSON", impl.encode_zodb_record,
                       {"@cls": [module, cls], "@s": json.loads(text)}),
                      (f"{oid} dict_to_pickle", impl.dict_to_pickle, impl.pickle_to_dict(data)),
                      (f"{oid} json_to_pickle", impl.json_to_pickle, impl.pickle_to_json(data)),
                      (f"{oid} encode_zodb_record_from_pg_json",
                       functools.partial(impl.encode_zodb_record_from_pg_json, module, cls), text.encode())]
            # error paths: where a twin keeps state across calls, an error is likeliest to leave it dirty
            calls += [(f"{oid} truncated {fn}", getattr(impl, fn), data[: len(data) // 2]) for fn in DECODERS[:3]]
            calls.append((f"{oid} damaged json_to_pickle", impl.json_to_pickle, text[:-1]))
    long_text = json.dumps({"a": "é" * 70000 + "\n", "b": {"@ns": "YQBi"}}, ensure_ascii=False)
    calls += [(f"long text {kind.__name__} encode_zodb_record_from_pg_json",
               functools.partial(impl.encode_zodb_record_from_pg_json, "m", "C"), kind(long_text.encode()))
              for kind in (bytes, bytearray)]
    calls += [("bad marker", impl.dict_to_pickle, {"x": {"@b": "YQ"}}),
              ("bad @cls", impl.encode_zodb_record, {"@cls": ["m", 1], "@s": 1}),
              ("unknown opcode", impl.pickle_to_dict, b"\x80\x03K\x01\xff.")]
    return calls


def run_threads(work: Callable[[int], None], name: str) -> None:
    """work(0) ... work(THREADS - 1), each in a thread of its own, all joined; none may hang."""
    threads = [threading.Thread(target=work, args=(i,), name=f"{name}-{i}") for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hangs"


def test_threads_get_what_one_thread_gets(impl):
    calls = workload(impl)
    expected = [outcome(fn, arg) for _, fn, arg in calls]
    assert sum(o[0] == "raised" for o in expected) > len(calls) // 10  # the error paths are there
    n = len(calls)
    barrier = threading.Barrier(THREADS)
    problems: List[str] = []
    lock = threading.Lock()

    def work(number: int) -> None:
        # Pairs of threads start at the same call (the same argument objects
        # at the same moment); the pairs start a quarter of the work apart.
        start = (number % (THREADS // 2)) * n // (THREADS // 2)
        mine: List[str] = []
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                for k in range(n):
                    i = (start + k) % n
                    label, fn, arg = calls[i]
                    got = outcome(fn, arg)
                    found = outcome_diff(expected[i], got)
                    if found:
                        mine.append(f"thread {number}, {label}: {found}")
                        if len(mine) >= 5:
                            break
        except BaseException as exc:  # noqa: BLE001 - reported below, not lost in the thread
            mine.append(f"thread {number} died: {describe(('raised', type(exc), str(exc)))}")
        with lock:
            problems.extend(mine)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: overlaps inside calls, not just between them
    try:
        run_threads(work, "codec")
    finally:
        sys.setswitchinterval(interval)
    assert not problems, f"{impl.name}: {len(problems)} differences from the single-threaded results:\n" + \
        "\n".join(problems[:20])


def test_pg_json_from_8_threads_over_the_whole_corpus(impl):
    """decode_zodb_record_for_pg_json on every corpus record and the long-text records, from 8 threads
    at once: each thread gets what one thread got (the Cython twin works on big strings without the GIL)."""
    records = [row_record(row) for name in NAMES for row in vectors(name)] + large_text_records()
    fn = impl.decode_zodb_record_for_pg_json
    expected = [outcome(fn, data) for data in records]
    barrier = threading.Barrier(THREADS)
    results: List[Any] = [None] * THREADS

    def work(number: int) -> None:
        try:
            barrier.wait()
            results[number] = [outcome(fn, data) for data in records]
        except BaseException as exc:  # noqa: BLE001 - reported below, not lost in the thread
            results[number] = f"thread {number} died: {describe(('raised', type(exc), str(exc)))}"

    run_threads(work, "pg-json")
    for number, got in enumerate(results):
        assert type(got) is list, got
        differences = [f"record {i}: {outcome_diff(want, have)}" for i, (want, have) in enumerate(zip(expected, got))
                       if outcome_diff(want, have)]
        assert not differences, f"{impl.name}, thread {number}:\n" + "\n".join(differences[:10])
