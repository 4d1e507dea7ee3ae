"""The compiled twin cannot take a process down: each fault once found, and its variants, in both twins.

Hostile or unusual input gets what the Python twin gives (a value, or the
same ValueError), never a crash, a hang or bytes from elsewhere in memory:
deep values in a thread of 128 KiB (musl's default stack), far memo
entries, a datetime offset that overflows 64 bits, a str of 4 GiB, memo
references that expand a few bytes into an exponential tree (the expansion
budget, docs/format.md), and code that runs while a walk holds what it
walks (the collector's ``__del__``, docs/design.md, "Where Python code can
run").
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import os
import pickle
import platform
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, List

import pytest

from zodb_json_codec import GlobalsPolicy

from helpers import DECODERS, PICKLE_DECODERS, RECORD_DECODERS, slowdown
from strictcompare import outcome, outcome_diff
from twinloader import load_twin
from zodb_json_codec._decode_common import EXPANSION_FLOOR, EXPANSION_PER_BYTE, expansion_budget

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def twins():
    return load_twin("python"), load_twin("cython")


def is_value_error(result: tuple, words: str = "") -> bool:
    """Is an outcome() a ValueError whose message has these words?"""
    return result[0] == "raised" and issubclass(result[1], ValueError) and words in result[2]


def same_outcomes(twins, fn: str, *args: Any, **kwargs: Any) -> tuple:
    """Both twins' outcome of fn(*args, **kwargs), which must be alike; the Python twin's."""
    python, cython = (outcome(functools.partial(getattr(twin, fn), **kwargs), *args) for twin in twins)
    difference = outcome_diff(python, cython)
    assert not difference, f"{fn}: the twins differ: {difference}"
    return python


def record_of(state_pickle: bytes) -> bytes:
    """A record of class foo.Bar (ZODB's GLOBAL form, memo 0) and the given state pickle."""
    return b"\x80\x03cfoo\nBar\nq\x00." + state_pickle


# ---------------------------------------------------------------------------
# Deep values: the direct lane, and a thread of 128 KiB
# ---------------------------------------------------------------------------

def newobj_chain(n: int, with_args: bool = False) -> bytes:
    """A state pickle of n NEWOBJ instances of foo.Bar, each BUILD with the next one as its state."""
    args = b"K\x07\x85" if with_args else b")"
    return (b"\x80\x03cfoo\nBar\nq\x01" + args + b"\x81" + (b"h\x01" + args + b"\x81") * (n - 1) + b"K\x05"
            + b"b" * n + b".")


@pytest.mark.parametrize("n", [999, 1001, 5000, pytest.param(50000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("with_args", [False, True])
def test_newobj_chains_in_the_direct_lane(twins, n, with_args):
    # The lane wrote an object's state before its depth check (unbounded C recursion, with the GIL released).
    rec = record_of(newobj_chain(n, with_args))
    for fn in RECORD_DECODERS:
        same_outcomes(twins, fn, rec)
    from zodb_json_codec import _decode_cython
    if n > 100:  # deeper than the lane's C walk: it declines, the decoder decides
        assert _decode_cython._direct_lane_record(rec) is None


def nested_sets(n: int) -> bytes:
    """A state pickle of set([set([... set([1]) ...])]) as frozensets n deep, each a REDUCE of a list."""
    return (b"\x80\x03" + b"cbuiltins\nfrozenset\n]" * n + b"K\x01a" + b"\x85Ra" * (n - 1) + b"\x85R.")


@pytest.mark.parametrize("n", [150, 600])
def test_known_type_calls_nested_in_the_direct_lane(twins, n):
    rec = record_of(nested_sets(n))
    for fn in RECORD_DECODERS:
        same_outcomes(twins, fn, rec)


# The deepest values the format takes (docs/format.md, "Nesting depth"), each shape 1000 levels.
STACK_CHECK = textwrap.dedent('''
    import json, pickle, sys, threading
    sys.path.insert(0, {tests!r})
    from deepvalues import json_text, nested_pickle
    from twinloader import twin_functions
    from strictcompare import outcome
    twin = twin_functions({twin!r})
    WRAP = {{"list": lambda v: [v], "dict": lambda v: {{"k": v}}, "tuple": lambda v: (v,),
            "@t": lambda v: {{"@t": [v]}}, "@d": lambda v: {{"@d": [[1, v]]}},
            "instance": lambda v: {{"@cls": ["m", "C"], "@s": v}},
            "@reduce": lambda v: {{"@reduce": {{"callable": {{"@cls": ["m", "f"]}}, "args": {{"@t": [v]}}}}}},
            "@ref": lambda v: {{"@ref": v}}}}
    INT_KEY = (b"}}J\\x01\\x00\\x00\\x00", b"s")  # {{1: v}}: the decoders' @d pairs, three JSON levels each
    def instances_around_a_marker(depth):
        # the JSON reader's instance levels, then a marker dict it builds as a value: one count of levels
        inner = 1
        for _ in range(depth):
            inner = {{"a": inner}}
        value = {{"@x": inner, "b": 1}}
        for _ in range(depth):
            value = {{"@cls": ["m", "C"], "@s": value}}
        return value
    def calls(depth):
        for shape, wrap in WRAP.items():
            value = 1
            for _ in range(depth):
                value = wrap(value)
            yield "encode_zodb_record", shape, ({{"@cls": ["m", "C"], "@s": value}},)
            yield "dict_to_pickle", shape, ({{"v": value}},)
            if shape != "tuple":
                text = json_text({{"v": value}})
                yield "json_to_pickle", shape, (text,)
                yield "encode_zodb_record_from_pg_json", shape, ("m", "C", text.encode())
        mixed = json_text(instances_around_a_marker(depth // 2))
        yield "encode_zodb_record_from_pg_json", "instances", ("m", "C", mixed.encode())
        yield "json_to_pickle", "instances", (mixed,)
        for shape in ("list", "dict", "tuple", "int_key"):
            before, after = INT_KEY if shape == "int_key" else (None, None)
            body = (before * depth + b"K\\x01" + after * depth if before
                    else nested_pickle(shape, depth))
            state = b"\\x80\\x03}}X\\x01\\x00\\x00\\x00v" + body + b"s."
            for fn in ("pickle_to_dict", "pickle_to_json"):
                yield fn, shape, (state,)
            for fn in ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json"):
                yield fn, shape, (pickle.dumps(("m", "C"), 3) + state,)
    results = []
    def run():
        for depth in (999, 1000, 1001):
            for fn, shape, args in calls(depth):
                result = outcome(getattr(twin, fn), *args)
                error = "" if result[0] == "ok" else result[1].__name__ + ": " + result[2]
                results.append([fn, shape, depth, "ValueError" if isinstance(result[1], type) and
                                issubclass(result[1], ValueError) else result[0], error])
    threading.stack_size({stack_kib} * 1024)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    print(json.dumps(results))
''')


# musl's default thread stack.  Under AddressSanitizer (scripts/asan-tests) C frames are several times larger
# (redzones): the 64 levels the C walks may take need about 300 KiB there, and 512 KiB is the bound; a walk that
# recursed without bound would still overflow it (1000 levels take megabytes in that build).
STACK_KIB = 512 if "libasan" in os.environ.get("LD_PRELOAD", "") else 128


def test_deepest_values_in_a_thread_of_128_kib(twins):
    # Each twin in a child process (a crash must fail this test, not end the run); every public function,
    # every shape, just within and just past the documented depth, in a thread with musl's default stack.
    outcomes = []
    for twin in twins:
        script = STACK_CHECK.format(tests=str(HERE), twin=twin.name, stack_kib=STACK_KIB)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{twin.name}: exit status {done.returncode}\n{done.stderr[-3000:]}"
        outcomes.append(json.loads(done.stdout))
    python, cython = outcomes
    assert python == cython
    kinds = {(depth, kind) for _, _, depth, kind, _ in python}
    assert (999, "ok") in kinds and (1001, "ValueError") in kinds, kinds  # the limit is there, in both twins
    assert {kind for _, _, _, kind, _ in python} == {"ok", "ValueError"}, python


# ---------------------------------------------------------------------------
# Far memo entries, widths
# ---------------------------------------------------------------------------

def far_memo_pickles() -> List[bytes]:
    long_put = lambda i: b"r" + struct.pack("<I", i)  # noqa: E731
    long_get = lambda i: b"j" + struct.pack("<I", i)  # noqa: E731
    dense = b"".join(b"Nq" + bytes([i]) + b"0" for i in range(256))
    return [
        # The issue's: a far entry, the dense list grown past it by BINPUTs, then fetched.
        b"\x80\x03X\x03\x00\x00\x00far" + long_put(300) + b"0" + dense + b"N" + long_put(400) + b"0]"
        + long_get(300) + b"a.",
        # Several far entries reached at once, one of them put again once the list holds it.
        b"\x80\x03X\x01\x00\x00\x00a" + long_put(280) + b"0X\x01\x00\x00\x00b" + long_put(290) + b"0" + dense
        + b"N" + long_put(600) + b"0X\x01\x00\x00\x00c" + long_put(290) + b"0]" + long_get(280) + long_get(290)
        + long_get(600) + b"\x87a.",
        # MEMOIZE numbers entries by count: a far entry reached by the list counts once.
        b"\x80\x04X\x01\x00\x00\x00a" + long_put(300) + b"0" + b"N\x94" * 400 + b"]h\x01" + long_get(300) + b"\x86a.",
        # Indices of 2**31 and more (negative as a 32-bit Py_ssize_t).
        b"\x80\x03X\x01\x00\x00\x00x" + long_put(0x80000000) + long_put(0xFFFFFFFF) + b"0" + long_get(0xFFFFFFFF)
        + long_get(0x80000000) + b"\x86.",
    ]


def as_loaded(value: Any) -> Any:
    """A decoded value of lists, {"@t": [...]} and atoms as pickle.loads gives it (tuples for @t)."""
    if type(value) is list:
        return [as_loaded(x) for x in value]
    if type(value) is dict and list(value) == ["@t"]:
        return tuple(as_loaded(x) for x in value["@t"])
    return value


@pytest.mark.parametrize("index", range(len(far_memo_pickles())))
def test_far_memo_entries(twins, index):
    # Far entries vanished once the dense memo list grew past them ("memo index 300 not found").
    data = far_memo_pickles()[index]
    python = same_outcomes(twins, "pickle_to_dict", data)
    # (the pure-Python unpickler: the C one allocates a memo array up to the index)
    assert python[0] == "ok" and as_loaded(python[1]) == pickle._loads(data), python
    for fn in PICKLE_DECODERS:
        same_outcomes(twins, fn, data)
    for fn in RECORD_DECODERS:
        same_outcomes(twins, fn, record_of(data))


@pytest.mark.parametrize("length", [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF])
@pytest.mark.parametrize("opcode", [b"X", b"B", b"T", b"\x8b"])  # BINUNICODE, BINBYTES, BINSTRING, LONG4
def test_four_byte_lengths_past_the_end(twins, opcode, length):
    # Every 4-byte length is compared with what is left as an unsigned number (on a 32-bit build the cast
    # would make these negative): each is an error at its offset, in every decoder and the direct lane.
    data = b"\x80\x03" + opcode + struct.pack("<I", length) + b"abc."
    for fn in PICKLE_DECODERS:
        python = same_outcomes(twins, fn, data)
        assert is_value_error(python), python
    for fn in RECORD_DECODERS:
        same_outcomes(twins, fn, record_of(data))


# ---------------------------------------------------------------------------
# A datetime offset past 64 bits
# ---------------------------------------------------------------------------

def zoned_datetime(days: int, seconds: int = 0, microseconds: int = 0) -> bytes:
    """datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(days, seconds, microseconds))), by hand."""
    return (b"\x80\x03cdatetime\ndatetime\nC\n\x07\xe4\x01\x02\x03\x04\x05\x00\x00\x00"
            b"cdatetime\ntimezone\ncdatetime\ntimedelta\nJ" + struct.pack("<i", days) + b"J"
            + struct.pack("<i", seconds) + b"J" + struct.pack("<i", microseconds) + b"\x87R\x85R\x86R.")


@pytest.mark.parametrize("days", [213503982, 106752, 100001, 100000, -213503982, -1, 0, 1])
def test_offsets_whose_microseconds_overflow(twins, days):
    # (days * 86400 + seconds) * 10**6 passed 2**63 at 106,752 days: the C text read a wrapped number
    # ("-08:01:49.551616" for 213,503,982 days).  Any offset of 24 hours or more is not a timezone's.
    data = zoned_datetime(days, 3600 if days == -1 else 0)
    for fn in PICKLE_DECODERS:
        same_outcomes(twins, fn, data)
    for fn in RECORD_DECODERS:
        same_outcomes(twins, fn, record_of(data))
    text = load_twin("cython").pickle_to_json(data)
    assert "08:01:49" not in text


# ---------------------------------------------------------------------------
# A str of 4 GiB
# ---------------------------------------------------------------------------

def four_gib_ascii_str(first: bytes) -> str:
    """An ASCII str of 2**32 + 16 characters whose first ones are the given bytes (the rest never written
    nor read: 4 GiB of address space, a few pages of memory)."""
    new = ctypes.pythonapi.PyUnicode_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_ssize_t, ctypes.c_uint32]
    s = new((1 << 32) + 16, 127)
    ctypes.memmove(id(s) + sys.getsizeof("") - 1, first, len(first))  # a compact ASCII str's characters
    return s


@pytest.mark.slow
@pytest.mark.skipif(platform.python_implementation() != "CPython" or sys.maxsize < 1 << 32,
                    reason="a 4 GiB str made through CPython's C API")
def test_a_str_of_4_gib_is_refused_unread(twins):
    # The Cython twin read such a str's first 16 characters as a (length, address) pair and wrote the
    # memory there into the pickle.  Protocol 3 cannot hold it: a ValueError, in both twins, before the
    # text is read (neither may touch its 4 GiB).
    secret = ctypes.create_string_buffer(b"NOT IN THE INPUT" * 4)
    s = four_gib_ascii_str(struct.pack("<qQ", 64, ctypes.addressof(secret)))
    python, cython = twins
    # The Python twin copies the str's 4 GiB before it finds out: once is enough.
    assert is_value_error(same_outcomes(twins, "dict_to_pickle", {"k": s}), "4 GiB")
    for value in ([s], {"@t": [s]}, {s[:3]: {"k": s}}, {"@d": [[1, s]]}):
        assert is_value_error(outcome(cython.dict_to_pickle, {"v": value}), "4 GiB"), value
    for record in ({"@cls": ["m", "C"], "@s": s}, {"@cls": ["m", "C"], "@s": {"k": [s]}}):
        assert is_value_error(outcome(cython.encode_zodb_record, record), "4 GiB"), record


# ---------------------------------------------------------------------------
# The expansion budget
# ---------------------------------------------------------------------------

def doubling_lists(levels: int) -> bytes:
    """A list memoized, then levels times a new list holding the previous one twice (GET, GET, LIST, PUT)."""
    body = b"\x80\x03]r\x00\x00\x00\x00"
    for k in range(levels):
        body += b"(j" + struct.pack("<I", k) + b"j" + struct.pack("<I", k) + b"lr" + struct.pack("<I", k + 1)
    return body + b"."


def doubling_dups(levels: int) -> bytes:
    """The same with DUP: a list, then levels times (DUP, TUPLE2)."""
    return b"\x80\x03]" + b"2\x86" * levels + b"."


def repeated_text(size: int, times: int) -> bytes:
    """A list of one text of size bytes, GET times more: quadratic in the input, not exponential."""
    return (b"\x80\x03](X" + struct.pack("<I", size) + b"x" * size + b"q\x01" + b"h\x01" * times + b"e.")


def doubling_objects(levels: int) -> bytes:
    """Built objects (the direct lane's kind) each holding the previous one twice in a tuple state."""
    body = b"\x80\x03cfoo\nBar\nq\x01)\x81K\x01bq\x02"
    for k in range(levels):
        body += b"h\x01)\x81h" + bytes([k + 2]) + b"h" + bytes([k + 2]) + b"\x86bq" + bytes([k + 3])
    return body + b"."


def changed_after_fetched(levels: int) -> bytes:
    """Empty lists fetched twice level by level (weighing little), then the first one filled: the shared
    lists grow after they were weighed, so the finished value is weighed again."""
    body = b"\x80\x03](]r\x00\x00\x00\x00"
    for k in range(levels):
        body += b"(j" + struct.pack("<I", k) + b"j" + struct.pack("<I", k) + b"lr" + struct.pack("<I", k + 1)
    body += b"j\x00\x00\x00\x00(" + b"X\x04\x00\x00\x00text" * 64 + b"e0"  # fill list 0
    return body + b"l."


def doubling_over(leaf: bytes, levels: int) -> bytes:
    """doubling_lists over a list holding one leaf value: weighed as written, the leaf's longer form (a float
    as {"@f": "1e+16"}, a text with U+0000 as base64) at each place."""
    body = b"\x80\x03]" + leaf + b"ar\x00\x00\x00\x00"
    for k in range(levels):
        body += b"(j" + struct.pack("<I", k) + b"j" + struct.pack("<I", k) + b"lr" + struct.pack("<I", k + 1)
    return body + b"."


def escaped_keys_after_fetched(levels: int) -> bytes:
    """Empty dicts fetched (weighing little), then each given two keys that look like escapes, both the
    next dict: written escaped, the keys are longer than read."""
    key = b"X\x18\x00\x00\x00@ns:" + b"x" * 20
    body = b"\x80\x03](" + b"".join(b"}r" + struct.pack("<I", k) for k in range(levels + 1)) + b"e"
    for k in range(levels):
        after = b"j" + struct.pack("<I", k + 1)
        body += b"j" + struct.pack("<I", k) + b"(" + key + after + key.replace(b"x", b"y") + after + b"u0"
    return body + b"."


HOSTILE = {
    "doubling_lists": doubling_lists(64),
    "doubling_lists_3kb": doubling_lists(330),
    "doubling_dups": doubling_dups(80),
    "repeated_text": repeated_text(1 << 16, 1 << 12),
    "doubling_objects": doubling_objects(60),
    "changed_after_fetched": changed_after_fetched(40),
    "doubling_big_floats": doubling_over(b"G" + struct.pack(">d", 1e16), 17),
    "doubling_nans": doubling_over(b"G" + struct.pack(">d", float("nan")), 17),
    "doubling_nul_texts": doubling_over(b"X\x01\x00\x00\x00\x00", 17),
    "escaped_keys_after_fetched": escaped_keys_after_fetched(13),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_memo_expansion_is_refused_quickly(twins, name):
    data = HOSTILE[name]
    for fns, arg in ((PICKLE_DECODERS, data), (RECORD_DECODERS, record_of(data))):
        for fn in fns:
            started = time.perf_counter()
            python = same_outcomes(twins, fn, arg)
            assert is_value_error(python, "expansion budget"), (fn, python)
            # both twins: far from a hang (docs/format.md gives the times measured; helpers.slowdown)
            assert time.perf_counter() - started < 20 * slowdown()
    from zodb_json_codec import _decode_cython
    assert _decode_cython._direct_lane_record(record_of(data)) is None


def test_sharing_within_the_budget_decodes(twins):
    # Below the budget, sharing is kept: the same values as pickle.loads, through every path.
    within = (doubling_lists(12), doubling_dups(12), repeated_text(1000, 200), doubling_objects(8),
              doubling_over(b"G" + struct.pack(">d", 1e16), 14), escaped_keys_after_fetched(12))
    for data in within:
        for fn in PICKLE_DECODERS:
            assert same_outcomes(twins, fn, data)[0] == "ok"
        for fn in RECORD_DECODERS:
            assert same_outcomes(twins, fn, record_of(data))[0] == "ok"


def _refused(data: bytes) -> bool:
    from zodb_json_codec import _decode_python
    try:
        _decode_python.decode_zodb_record(data)
    except ValueError as e:
        assert "expansion budget" in str(e), e
        return True
    return False


def lane_sharing(shape: str, n: int) -> bytes:
    """A state the direct lane takes: {"k": [...]}, the list holding a text of 1000 bytes and n GETs of it
    ("text"), or a built object and n levels of objects each holding the previous one twice ("objects")."""
    body = b"\x80\x03}(X\x01\x00\x00\x00k]("
    if shape == "text":
        body += b"X\xe8\x03\x00\x00" + b"x" * 1000 + b"q\x01" + b"h\x01" * n
    else:
        body += b"cfoo\nBar\nq\x01)\x81K\x01bq\x02"
        for k in range(n):
            body += b"h\x01)\x81h" + bytes([k + 2]) + b"h" + bytes([k + 2]) + b"\x86bq" + bytes([k + 3])
    return body + b"eu."


@pytest.mark.parametrize("shape", ["text", "objects"])
def test_the_lane_weighs_what_the_memo_repeats_no_less_than_the_decoder(twins, shape):
    # The direct lane weighs a GET's node when it fetches it (_pickletext_cython._fetched_weight), the
    # decoder its value: at the budget's edge the lane declines every record the decoder refuses (the
    # usual way then refuses it too), and it takes the records well within.  (twins: skipped where the
    # Cython twin is not built, as the lane is its own.)
    decoder = twins[1].decode_module

    def lane(n):
        return decoder._direct_lane_record(record_of(lane_sharing(shape, n)))

    low, high = 1, 4096 if shape == "text" else 60  # taken at low, refused at high
    assert not _refused(record_of(lane_sharing(shape, low))) and _refused(record_of(lane_sharing(shape, high)))
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _refused(record_of(lane_sharing(shape, middle))) else (middle, high)
    for n in range(high, high + 3):
        assert lane(n) is None, n
    # within: 90% of the texts; the objects' weight doubles with each level, the lane's is at most 8 times
    assert lane(low * 9 // 10 if shape == "text" else low - 3) is not None


def test_the_budget_is_a_multiple_of_the_input():
    assert expansion_budget(0) == EXPANSION_FLOOR
    assert expansion_budget(1000) == EXPANSION_FLOOR + 1000 * EXPANSION_PER_BYTE


def test_corpora_stay_far_below_the_budget(monkeypatch):
    # The margin real records keep (docs/format.md): the weight their memo references add, per record,
    # against the budget of the record's size.
    from corpus import records
    from zodb_json_codec import _decode_python

    worst = [0.0]
    fetched = _decode_python._fetched

    def noted(ctx, value, start):
        fetched(ctx, value, start)
        worst[0] = max(worst[0], ctx.fetched / ctx.budget)

    monkeypatch.setattr(_decode_python, "_fetched", noted)
    for name in ("public", "wikipedia"):
        for _, data in records(name):
            _decode_python.decode_zodb_record(data)
    assert 0 < worst[0] < 0.05, worst  # 1.3% at most, measured


# ---------------------------------------------------------------------------
# Python code that runs while a walk holds what it walks
# ---------------------------------------------------------------------------

class Meddler:
    """Garbage in a reference cycle whose __del__ changes the containers it was given."""

    def __init__(self, change: Callable[[], None]) -> None:
        self.change = change
        self.cycle = self

    def __del__(self) -> None:
        self.change()


def collected_soon(change: Callable[[], None]) -> None:
    """Leave garbage that runs change() in the next collection."""
    Meddler(change)


def meddled_values():
    """(label, encoder, argument, change): values whose parts a collection changes while they are encoded."""
    def kv_pairs():
        pairs = [[f"k{i:02d}", {"v": i}] for i in range(12)]
        return pairs, lambda: (pairs.__delitem__(slice(1, None)), pairs[0].clear())
    pairs, change = kv_pairs()
    yield "@kv shrunk", "encode_zodb_record", {"@cls": ["BTrees.OOBTree", "OOBucket"], "@s": {"@kv": pairs}}, change
    items = [{"a": [i, str(i)]} for i in range(40)]
    yield "list cleared", "dict_to_pickle", {"v": items}, items.clear
    d = {f"k{i}": [i] for i in range(40)}
    yield "dict cleared", "dict_to_pickle", {"v": d}, d.clear
    t = [[i, {"x": i}] for i in range(20)]
    yield "@t items cleared", "dict_to_pickle", {"v": {"@t": t}}, t.clear
    state = {"a": [1, 2, 3], "b": {"c": [4]}}
    record = {"@cls": ["m", "C"], "@s": state}
    yield "record emptied", "encode_zodb_record", record, record.clear
    pairs2 = [[i, [i]] for i in range(20)]
    yield "@d pairs cleared", "dict_to_pickle", {"v": {"@d": pairs2}}, pairs2.clear
    inner = {"callable": {"@cls": ["m", "f"]}, "args": {"@t": [[1], [2]]}, "state": {"s": [3]}}
    yield "@reduce emptied", "dict_to_pickle", {"v": {"@reduce": inner}}, inner.clear


@pytest.mark.parametrize("case", range(len(list(meddled_values()))))
def test_collections_that_change_what_the_encoders_walk(twins, case):
    # Under gc.set_threshold(1) a collection can start at any allocation (on CPython 3.11 and earlier inside
    # the allocation itself), running a __del__ that changes the value being encoded: no crash and no read
    # of freed memory (scripts/asan-tests runs this under AddressSanitizer); the encode gives a pickle, or
    # the ValueError or RuntimeError a change of what is being read gives.
    for twin in twins:
        label, fn, arg, change = list(meddled_values())[case]
        threshold = gc.get_threshold()
        gc.collect()
        collected_soon(change)
        gc.set_threshold(1)
        try:
            result = outcome(getattr(twin, fn), arg)
        finally:
            gc.set_threshold(*threshold)
            gc.collect()
        assert result[0] == "ok" or issubclass(result[1], (ValueError, RuntimeError)), (twin.name, label, result)
        if result[0] == "ok":
            assert type(result[1]) is bytes


def test_collections_during_decoding(twins):
    # The decoders walk values of their own; a collection during a decode runs other objects' __del__,
    # here one that allocates much (starting more collections) while the decoder holds its stack and memo.
    from corpus import records

    samples = [data for _, data in list(records("wikipedia"))[:40]] + list(HOSTILE.values())[:2]
    churn = []

    def allocate():
        churn.append([[i] for i in range(100)])

    for twin in twins:
        threshold = gc.get_threshold()
        gc.set_threshold(1)
        try:
            for data in samples:
                for fn in DECODERS:
                    collected_soon(allocate)
                    result = outcome(getattr(twin, fn), data)
                    assert result[0] == "ok" or is_value_error(result), (twin.name, fn, result)
        finally:
            gc.set_threshold(*threshold)
            gc.collect()


# A child process for each: the collector starts where the first allocation of its kind happens in a process.
COLLECTED_INSIDE = textwrap.dedent('''
    import gc, sys
    sys.path.insert(0, {tests!r})
    from twinloader import twin_functions
    twin = twin_functions({twin!r})

    class Bomb:
        def __del__(self):
            action, Bomb.action = Bomb.action, None
            if action is not None:
                action()

    def big():
        return (1 << 70) + len(sys.argv)  # made at run time

    def encode_while(action, value, fn="encode_zodb_record"):
        """fn(value), with garbage whose __del__ runs action at the first collection (on 3.11 and earlier:
        the first allocation of a container inside the call)."""
        hold = [(tuple([i, i]), [i], {{i: i}}) for i in range(5000)]  # empties the free lists
        gc.collect()
        gc.set_threshold(1)
        gc.disable()
        Bomb.action = action
        bomb = Bomb()
        bomb.cycle = bomb
        del bomb
        gc.enable()
        try:
            out = getattr(twin, fn)(value)
            assert type(out) is bytes
        except (ValueError, RuntimeError):
            pass
        finally:
            gc.set_threshold(700, 10, 10)
        del hold

    case = {case!r}
    if case == "big int among a dict's values":
        state = {{f"k{{i}}": i for i in range(20)}}
        state["k0"] = big()
        encode_while(state.clear, {{"@cls": ["m", "C"], "@s": state}})
    elif case == "big int among a list's items":
        items = [big()] + list(range(20))
        encode_while(items.clear, {{"v": items}}, "dict_to_pickle")
    elif case == "big int key among @kv pairs":
        pairs = [[big(), "v%d" % i] for i in range(10)]
        encode_while(pairs.clear, {{"@cls": ["BTrees.OOBTree", "OOBucket"], "@s": {{"@kv": pairs}}}})
    elif case == "big ints in @td":
        parts = [big(), big(), big()]
        encode_while(parts.clear, {{"@cls": ["m", "C"], "@s": {{"td": {{"@td": parts}}}}}})
    elif case == "big int among a pytz zone's arguments":
        tz = {{"pytz": ["Europe/Paris", big(), 3600, "CET"], "name": "Europe/Paris"}}
        encode_while(lambda: tz.__setitem__("pytz", None),
                     {{"@cls": ["m", "C"], "@s": {{"when": {{"@dt": "2020-01-02T03:04:05", "@tz": tz}}}}}})
    elif case == "a reference's class name freed":
        ref = ["0000000000000001", "mod.Na" + "\\udcff" + "x" * 3000 + str(len(sys.argv))]
        encode_while(lambda: ref.__setitem__(1, "replaced"), {{"@cls": ["m", "C"], "@s": {{"r": {{"@ref": ref}}}}}})
    elif case == "@kv pairs shrunk":
        pairs = [[f"k{{i:02d}}", {{"v": i}}] for i in range(12)]
        encode_while(lambda: (pairs.__delitem__(slice(1, None)), pairs[0].clear()),
                     {{"@cls": ["BTrees.OOBTree", "OOBucket"], "@s": {{"@kv": pairs}}}})
    elif case == "a pair emptied while its big int key is written":
        pair = [big(), "value-" + "v" * 40]
        encode_while(pair.clear, {{"v": {{"@d": [pair, [1, 2]]}}}}, "dict_to_pickle")
    print("survived")
''')

COLLECTED_CASES = ["big int among a dict's values", "big int among a list's items", "big int key among @kv pairs",
                   "big ints in @td", "big int among a pytz zone's arguments", "a reference's class name freed",
                   "@kv pairs shrunk", "a pair emptied while its big int key is written"]


@pytest.mark.parametrize("case", COLLECTED_CASES)
def test_collections_inside_the_first_allocation(twins, case):
    # A value whose writing allocates (a big int's bytes, a lone surrogate's error) can start the collector
    # on CPython 3.11 and earlier; its __del__ then changes what the walk was reading.  PYTHONMALLOC=debug
    # fills freed memory, so a read of it crashes rather than passes unseen.
    for twin in twins:
        script = COLLECTED_INSIDE.format(tests=str(HERE), twin=twin.name, case=case)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              env={**__import__("os").environ, "PYTHONMALLOC": "debug"})
        assert done.returncode == 0 and "survived" in done.stdout, (twin.name, done.returncode, done.stderr[-2000:])


def test_a_key_whose_del_clears_the_dict(twins):
    # A key of another type is held while it is written; its last reference, dropped once the next key is
    # read, ran its __del__ while the walk held that next value's pointer: no collector needed.
    for twin in twins:
        d: dict = {}

        class Key(str):
            def __str__(self):
                if self == "k1":
                    del d[self]
                    d["late"] = 0  # the same size: the walk goes on
                return str.__str__(self)

            def __del__(self):
                if str.__eq__(self, "k1"):
                    d.clear()

        d[Key("k1")] = 1
        d[Key("k2")] = "value-" + "v" * 40 + str(len(d))
        d["tail"] = 3
        result = outcome(twin.encode_zodb_record, {"@cls": ["m", "C"], "@s": d})
        assert result[0] == "ok" or issubclass(result[1], (ValueError, RuntimeError)), (twin.name, result)


def test_test_helpers_take_no_none():
    load_twin("cython")  # skips, saying why, where the Cython twin cannot be had (PyPy, no build)
    from zodb_json_codec import _decode_cython, _encode_cython
    with pytest.raises(TypeError):
        _decode_cython._direct_lane_record(None)
    with pytest.raises(TypeError):
        _encode_cython._one_pass_record("m", None, "{}")


# -- class names the GLOBAL opcode cannot carry -----------------------------------------------------------------

SURROGATE_CLASSES = [["a\udc95b", "C"], ["m", "\ud800"], ["m\udfff.n", "C"]]


def global_routes(module: str, name: str) -> List[tuple]:
    """(function, argument) pairs that write GLOBAL "module\\nname\\n": an instance in a state, a reduce's
    callable (through the value encoder, the JSON text reader and the record encoder), a record's compact
    @ref (dict_to_pickle's @ref is the verbose form: its id, a list of strs, is no GLOBAL)."""
    instance = {"x": {"@cls": [module, name], "@s": {"a": 1}}}
    reduce = {"x": {"@reduce": {"callable": {"@cls": [module, name]}, "args": {"@t": [1]}}}}
    routes = []
    for value in (instance, reduce):
        routes += [("dict_to_pickle", value), ("json_to_pickle", json.dumps(value)),
                   ("encode_zodb_record", {"@cls": ["m", "C"], "@s": value})]
    reference = {"@cls": ["m", "C"], "@s": {"x": {"@ref": ["0000000000000001", f"{module}.{name}"]}}}
    return routes + [("encode_zodb_record", reference)]


@pytest.mark.parametrize("module,name", SURROGATE_CLASSES)
def test_class_names_with_lone_surrogates_are_refused(twins, module, name):
    """A lone surrogate has no strict UTF-8: written into a GLOBAL line it would make a pickle that no decoder
    (ours, pickle's) reads back. Both twins refuse it; a record's own class (a tuple of strs, not a GLOBAL)
    keeps it like any other str."""
    # No such name is an identifier: the globals policy refuses them all (docs/security.md, hard rules) ...
    record = {"@cls": [module, name], "@s": {"a": 1}}
    for fn, argument in global_routes(module, name) + [("encode_zodb_record", record)]:
        result = same_outcomes(twins, fn, argument)
        assert is_value_error(result, "no allowlist lifts this"), (fn, argument, result)
    # ... and without it, the writers refuse what they cannot write.
    with pytest.warns(RuntimeWarning):
        anything = GlobalsPolicy("unrestricted")
    for fn, argument in global_routes(module, name):
        result = same_outcomes(twins, fn, argument, policy=anything)
        assert is_value_error(result, "not UTF-8 text"), (fn, argument, result)
    data = same_outcomes(twins, "encode_zodb_record", record, policy=anything)[1]
    assert same_outcomes(twins, "decode_zodb_record", data) == ("ok", record)


def test_non_ascii_class_names_still_round_trip(twins):
    for fn, argument in global_routes("modül", "Ça"):
        data = same_outcomes(twins, fn, argument)
        assert data[0] == "ok", (fn, data)
        decode = "decode_zodb_record" if fn == "encode_zodb_record" else "pickle_to_dict"
        back = same_outcomes(twins, decode, data[1])
        assert back == ("ok", json.loads(argument) if fn == "json_to_pickle" else argument), (fn, back)
