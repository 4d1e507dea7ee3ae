"""Decoding and encoding thousands of times keeps memory flat, for each twin, on the success and error paths alike.

A Cython twin that forgets one reference (or one ``free``) per call
shows up only over many calls: corpus records go through all eight
functions (and inputs each function refuses: error paths leak most often)
100 000 times after a warm-up, while these stay flat: the number of blocks
Python's object allocator holds (``sys.getallocatedblocks``: each leaked
object is one), the bytes C ``malloc`` has handed out (glibc's
``mallinfo2``: buffers, and Python's allocations above 512 bytes), the
process's resident size (any allocator at all), and what ``tracemalloc``
sees (with the line to blame when it fails).  The first three are measured
in a child interpreter, whose memory is the workload's alone: memory other
tests freed but the process kept would take a leak in unseen.  A last test
plants a leak of one small object per call and checks that each measure
sees it, so none of them is blind.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from corpus import NAMES, row_record, vectors
from deepvalues import json_text
from helpers import DECODERS, RECORD_DECODERS

pytestmark = [pytest.mark.skipif(sys.implementation.name != "cpython",
                                 reason="measures CPython's allocators; PyPy runs only the Python twin, whose "
                                        "memory its garbage collector and JIT manage"),
              pytest.mark.slow]  # thousands of calls per measure

TESTS = Path(__file__).resolve().parent

Call = Tuple[Callable[[Any], Any], Any]

# --- How much is measured, and what counts as growth ------------------------
#
# A leak worth finding loses at least one small object per call: a forgotten
# reference to an int, a float, a 1-character str or an empty tuple, each a
# 32-byte block of Python's object allocator on a 64-bit build.
SMALL_OBJECT_BYTES = 32
# The measured phase makes at least this many calls (some 8 s for the Python
# twin, 1 s for the Cython twin)...
MIN_CALLS = 100_000
# ... so such a leak is 100 000 blocks more, and grows the resident size by
# 3.2 MB once it has filled the pools the warm-up left free.  Without a
# leak, caches (the re module's, the type attribute cache, interned
# strings) settle in the warm-up and the block count moves by some dozens.
BLOCKS_LIMIT = 2_000
# The resident size moves by whole pages and arenas: without a leak it stays
# within 100 kB here; 1 MiB leaves room for that and is a third of the
# smallest leak's growth.
RSS_LIMIT = 1024 * 1024
# Leaked buffers are malloc'ed bytes: a leak of the smallest one a twin
# would allocate (the encoder's output, at least 16 bytes with malloc's
# overhead) adds 1.6 MB; without a leak, what malloc holds moves by a few kB.
MALLOC_LIMIT = 256 * 1024
MALLOC_SMALL_CHUNK = 16
# tracemalloc slows the Python twin down some twenty times: a shorter run,
# which a leak of one 32-byte object per call (192 kB over 6 000 calls)
# still overshoots ten times; without a leak, what the codec's lines hold
# moves by some hundred bytes.
TRACED_MIN_CALLS = 6_000
TRACED_LIMIT = 16 * 1024

WARMUP_ROUNDS = 5


def _rss() -> int:
    """The resident size now (Linux: /proc/self/statm), else the peak so far (which only a growth can move)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _malloc_in_use() -> Optional[int]:
    """Bytes malloc has handed out and not got back (glibc >= 2.33), else None."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd  # heap chunks in use + chunks mmap'ed on their own


def _sample_records(count: int = 90) -> List[bytes]:
    """Small records of as many classes as there are, then evenly spread others: many calls, every mapping."""
    by_class: Dict[tuple, bytes] = {}
    small = []
    for name in NAMES:
        for row in vectors(name):
            data = row_record(row)
            if len(data) > 2000:
                continue
            small.append(data)
            key = tuple(row["pg_json"][:2]) if row["pg_json"] else ("", row["oid"])
            by_class.setdefault(key, data)
    picked = list(by_class.values())
    step = max(1, len(small) // max(1, count - len(picked)))
    picked += small[::step][: max(0, count - len(picked))]
    return picked


def _nested_lists(depth: int) -> bytes:
    return b"\x80\x03" + b"]" * depth + b"a" * (depth - 1) + b"."


CLASS_PICKLE = b"\x80\x03cpersistent.mapping\nPersistentMapping\nq\x00."


def _bad_inputs(records: List[bytes]) -> List[Tuple[str, Any]]:
    """(function, argument) pairs that raise: damaged pickles, malformed markers, bad JSON, wrong types, too deep."""
    bad: List[Tuple[str, Any]] = []
    for data in records[:8]:
        for cut in (len(data) // 3, len(data) - 1, 30):
            bad += [(fn, data[:cut]) for fn in DECODERS]
        bad += [(fn, data[:20] + b"\xff" + data[20:]) for fn in DECODERS]  # an unknown opcode
    deep_state = b"\x80\x03" + b"]" * 1002 + b"N" + b"a" * 1002 + b"."
    bad += [(fn, CLASS_PICKLE + deep_state) for fn in RECORD_DECODERS]
    bad += [("pickle_to_dict", deep_state), ("pickle_to_json", _nested_lists(1100))]
    bad += [("pickle_to_dict", b"\x80\x03K\x01h\x05."), ("pickle_to_dict", b"\x80\x03}K\x01s."),
            ("pickle_to_json", b"\x80\x03X\x02\x00\x00\x00\xff\xfe."), ("decode_zodb_record", b"\x80\x03K\x01.N.")]
    deep: Any = None
    for _ in range(1100):
        deep = [deep]
    for marker in ({"@b": "YQ"}, {"@dt": "yesterday"}, {"@uuid": "xyz"}, {"@td": [1, 2, "3"]},
                   {"@reduce": {"callable": None}}, {"@d": [[1, 2, 3]]}, {"@ref": ["zz", "m.C"]}, [object()],
                   {"ok": [1, 2.5, "x"], "bad": {"@f": "NaNa"}}, deep):
        bad.append(("encode_zodb_record", {"@cls": ["m", "C"], "@s": {"x": marker}}))
        bad.append(("dict_to_pickle", {"x": marker}))
        try:
            bad.append(("json_to_pickle", json_text({"x": marker})))
        except TypeError:
            pass  # [object()]: not JSON
    bad += [("json_to_pickle", text) for text in ("", "[1,]", '{"a": 1} x', "NaN", '"\\ud800', "[" * 1100)]
    bad += [("encode_zodb_record", {"@s": 1}), ("encode_zodb_record", {"@cls": ["m", 1], "@s": 1})]
    bad += [(fn, "text") for fn in DECODERS] + [("dict_to_pickle", [1]), ("json_to_pickle", b"{}")]
    return bad


def workload(impl) -> List[Call]:
    """One round: records through the eight functions (the encoders get this twin's own outputs), then bad inputs."""
    calls: List[Call] = []
    records = _sample_records()
    for data in records:
        calls += [(getattr(impl, fn), data) for fn in DECODERS]
        module, name, text, _ = impl.decode_zodb_record_for_pg_json(data)
        calls += [(impl.encode_zodb_record, impl.decode_zodb_record(data)),
                  (impl.encode_zodb_record, {"@cls": [module, name], "@s": json.loads(text)}),
                  (impl.dict_to_pickle, impl.pickle_to_dict(data)),
                  (impl.json_to_pickle, impl.pickle_to_json(data)),
                  (functools.partial(impl.encode_zodb_record_from_pg_json, module, name), text),
                  (functools.partial(impl.encode_zodb_record_from_pg_json, module, name), text.encode()),
                  (functools.partial(impl.encode_zodb_record_from_pg_json, module, name), text[:-1].encode())]
    long_text = json_text({"a": "é" * 70000 + "\n", "b": [{"@ref": ["0001", "m.C"]}, {"@ns": "YQBi"}]})
    calls += [(functools.partial(impl.encode_zodb_record_from_pg_json, "m", "C"), long_text),
              (functools.partial(impl.encode_zodb_record_from_pg_json, "m", "C"), long_text.encode())]
    failing = 0
    for fn, arg in _bad_inputs(records):
        call = getattr(impl, fn)
        try:
            call(arg)
        except (ValueError, TypeError):
            calls.append((call, arg))
            failing += 1
    # (a single-pickle decoder reads a truncated record's intact class pickle: not all of them fail)
    assert failing >= 80, f"{impl.name}: only {failing} of the bad inputs fail"
    return calls


def run(calls: List[Call], rounds: int) -> None:
    for _ in range(rounds):
        for fn, arg in calls:
            try:
                fn(arg)
            except (ValueError, TypeError):
                pass


def rounds_for(calls: List[Call], min_calls: int) -> int:
    return -(-min_calls // len(calls))


def grown(calls: List[Call], rounds: int) -> Dict[str, Any]:
    """How far blocks, malloc'ed bytes and resident size grew over rounds more rounds (after gc)."""
    gc.collect()
    blocks, malloced, rss = sys.getallocatedblocks(), _malloc_in_use(), _rss()
    run(calls, rounds)
    gc.collect()
    after = _malloc_in_use()
    return {"blocks": sys.getallocatedblocks() - blocks, "rss": _rss() - rss,
            "malloc": None if malloced is None or after is None else after - malloced}


def leaky(calls: List[Call]) -> List[Call]:
    """The calls, each also losing a new float (a missing Py_DECREF) and a smallest malloc chunk (a missing free)."""
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes, incref.restype = [ctypes.py_object], None
    malloc = ctypes.CDLL(None).malloc
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p

    def leaking(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def call(arg: Any) -> Any:
            incref(float(len(calls)) + 0.5)  # a new float each call, never freed
            malloc(1)
            return fn(arg)
        return call

    return [(leaking(fn), arg) for fn, arg in calls]


def measured_in_child(implementation: str, leak: bool = False) -> Dict[str, Any]:
    """grown() over MIN_CALLS calls after the warm-up, in a child interpreter: its memory is the workload's alone."""
    code = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        import test_leaks as L
        from twinloader import twin_functions
        impl = twin_functions({implementation!r})
        calls = L.workload(impl)
        if {leak!r}:
            calls = L.leaky(calls)
        L.run(calls, L.WARMUP_ROUNDS)
        rounds = L.rounds_for(calls, L.MIN_CALLS)
        t = time.perf_counter()
        result = L.grown(calls, rounds)
        result.update(calls=rounds * len(calls), seconds=round(time.perf_counter() - t, 2))
        print("RESULT:" + json.dumps(result))
    """)
    proc = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=600,
                          cwd=str(TESTS))
    assert proc.returncode == 0, f"the child interpreter failed (exit status {proc.returncode}):\n{proc.stderr[-4000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT:"):])


def traced_growth(calls: List[Call], rounds: int) -> Tuple[int, List[str]]:
    """Net bytes tracemalloc saw allocated over rounds more rounds, and the ten largest growths by line.

    Counted are allocations made on a line of the codec's pure-Python
    modules or of this file (where a Cython twin's allocations show, its
    functions having no Python frames).  Not counted: those made inside the
    standard library, which are not the codec's: json.loads, as the Python twin's
    json_to_pickle calls it, keeps a few dozen bytes per hundred calls on
    its make_scanner line under tracemalloc only (CPython 3.11; without
    tracing, the block count stays flat over 100 000 calls; the other test
    covers it).
    """
    import tracemalloc  # not on PyPy

    import zodb_json_codec

    tracemalloc.start(1)
    try:
        run(calls, 1)  # allocations made once under tracing (lazy caches) are not a leak
        gc.collect()
        before = tracemalloc.take_snapshot()
        run(calls, rounds)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine = [tracemalloc.Filter(True, os.path.join(os.path.dirname(zodb_json_codec.__file__), "*")),
            tracemalloc.Filter(True, __file__)]
    stats = after.filter_traces(mine).compare_to(before.filter_traces(mine), "lineno")
    top = [str(s) for s in sorted(stats, key=lambda s: -s.size_diff)[:10]]
    return sum(s.size_diff for s in stats), top


def test_blocks_malloc_and_resident_size_stay_flat(impl):
    growth = measured_in_child(impl.name)
    total = growth["calls"]
    # The test can fail: a leak of one small object (or chunk) per call is far above each limit.
    assert total >= MIN_CALLS
    assert total > 10 * BLOCKS_LIMIT and total * SMALL_OBJECT_BYTES > 3 * RSS_LIMIT
    assert total * MALLOC_SMALL_CHUNK > 6 * MALLOC_LIMIT
    detail = f"{impl.name}: {total} calls grew {growth}"
    assert growth["blocks"] < BLOCKS_LIMIT, detail
    if growth["malloc"] is not None:  # None: not glibc
        assert growth["malloc"] < MALLOC_LIMIT, detail
    assert growth["rss"] < RSS_LIMIT, detail


def test_tracemalloc_sees_no_growth(impl):
    calls = workload(impl)
    run(calls, WARMUP_ROUNDS)
    rounds = rounds_for(calls, TRACED_MIN_CALLS)
    assert rounds * len(calls) * SMALL_OBJECT_BYTES > 10 * TRACED_LIMIT
    growth, top = traced_growth(calls, rounds)
    assert growth < TRACED_LIMIT, f"{impl.name}: {growth} bytes more after {rounds * len(calls)} calls:\n" + \
        "\n".join(top)


def test_the_measures_see_a_leak_of_one_small_object_per_call():
    # The Python twin's workload, each call also losing one float and one
    # smallest malloc chunk: every measure must report more than its limit.
    growth = measured_in_child("python", leak=True)
    assert growth["blocks"] > BLOCKS_LIMIT and growth["rss"] > RSS_LIMIT, growth
    assert growth["malloc"] is None or growth["malloc"] > MALLOC_LIMIT, growth
    # tracemalloc sees every allocation: a cheap workload of as many calls shows the same.
    calls = leaky([(len, b"x")] * 1000)
    traced, _ = traced_growth(calls, rounds_for(calls, TRACED_MIN_CALLS))
    assert traced > TRACED_LIMIT, traced
