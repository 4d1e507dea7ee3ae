"""Differential tests: the Cython twin against the Python (normative) one, both in one process, call by call.

Every call goes to both twins and must have the same outcome: the same
value (strictly: types, dict key order, float bits; JSON text and pickle
bytes identical) or the same exception type with the same message.  Where
they differ, the Cython twin is wrong.  Inputs: every record of the
corpora (and each of its two pickles alone), generated Python values
pickled with protocols 0-5, damaged corpus records, and marker trees and
JSON texts (well-formed and not) for the encoders.
"""

from __future__ import annotations

import array
import base64
import collections
import copy
import ctypes
import datetime
import decimal
import enum
import io
import json
import math
import pickle
import pickletools
import platform
import re
import struct
import sys
import uuid
import warnings
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
import pytz
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from corpus import NAMES, row_record, vectors
from deepvalues import json_text, nested_pickle
from helpers import (DECODERS, ENCODERS, MAX_EXAMPLES, MIXED_BLOCKS, NOT_THREE_BYTE, ODD_CHARACTERS, PICKLE_DECODERS,
                     THREE_BYTE_RUN, large_text_records, record, utf8_texts)
from strategies import (MARKER_KEYS, any_texts, class_pickles, decimals, floats, ints, pickled_hashable_leaves,
                        pickled_leaves, pickled_marker_keys, pickled_states, pickled_values, records)
from strictcompare import describe, diff, outcome, outcome_diff
from twinloader import load_twin


# CODEC_HYPOTHESIS_EXAMPLES scales these up for a longer hunt, as in test_hypothesis.
SETTINGS = settings(max_examples=MAX_EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

# A failure lists this many differences (there may be thousands of one bug).
SHOWN = 15


# ---------------------------------------------------------------------------
# Both twins, in one process
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def twins() -> Tuple[SimpleNamespace, SimpleNamespace]:
    """(python, cython); skipped, failed or given as conftest's ``impl`` fixture decides for the Cython twin."""
    from zodb_json_codec import _impl

    assert set(_impl.DECODE_FUNCTIONS) == set(DECODERS) and set(_impl.ENCODE_FUNCTIONS) == set(ENCODERS)
    cython = load_twin("cython")
    return load_twin("python"), cython


# ---------------------------------------------------------------------------
# Comparing calls
# ---------------------------------------------------------------------------

class Differences:
    """Differences found so far, each labelled so that it can be reproduced."""

    def __init__(self) -> None:
        self.found: List[str] = []

    def note(self, label: str, python: Tuple, cython: Tuple) -> None:
        """Compare two observe() results: the outcomes, then the warnings."""
        found = outcome_diff(python[:-1], cython[:-1])
        if found:
            self.found.append(f"{label}: {found}")
        elif python[-1] != cython[-1]:
            self.found.append(f"{label}: warned {python[-1]} != {cython[-1]}")

    def __bool__(self) -> bool:
        return bool(self.found)

    def report(self) -> str:
        more = len(self.found) - SHOWN
        return "\n".join(self.found[:SHOWN] + ([f"... and {more} more"] if more > 0 else []))


def observe(fn: Callable[..., Any], *args: Any) -> Tuple:
    """outcome() plus, last, the warnings the call gave: (category name, message) pairs.

    (A twin that warns differently would fail differently under ``-W error``;
    neither should warn at all.)
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = outcome(fn, *args)
    return result + (tuple((w.category.__name__, str(w.message)) for w in caught),)


def one_argument(twin, fn: str) -> Callable[[Any], Any]:
    """A twin's function of its one varying argument (encode_zodb_record_from_pg_json's is state_json)."""
    f = getattr(twin, fn)
    return (lambda arg: f("app.mod", "Kls", arg)) if fn == "encode_zodb_record_from_pg_json" else f


def call_both(twins, fn: str, arg: Any) -> Tuple[Tuple, Tuple]:
    python, cython = twins
    return observe(one_argument(python, fn), arg), observe(one_argument(cython, fn), arg)


def encode_both(twins, fn: str, arg: Any, found: Differences, label: str) -> None:
    """Both encoders on arg; neither may change it (checked on deep copies taken before and after each call)."""
    before = copy.deepcopy(arg)
    outcomes = []
    for twin in twins:
        outcomes.append(observe(getattr(twin, fn), arg))
        changed = diff(before, copy.deepcopy(arg))
        if changed:
            found.found.append(f"{label} {fn}: the {twin.name} twin changed its argument: {changed}")
            return
    found.note(f"{label} {fn}", *outcomes)


def compare_decoders(twins, data: bytes, found: Differences, label: str, functions=DECODERS,
                     encode: bool = True) -> Dict[str, Tuple]:
    """Every decoder on data; then every encoder on what the Python twin decoded.

    Also each twin's encoder on its own decoder's output (the whole round
    trip), which sees a difference in the shape of the decoded values (shared
    objects, say) that the values themselves do not show.
    """
    python_outcomes = {}
    for fn in functions:
        python, cython = call_both(twins, fn, data)
        found.note(f"{label} {fn}", python, cython)
        python_outcomes[fn] = python
        if encode and python[0] == "ok" and cython[0] == "ok":
            for enc, arg_of in _ENCODER_INPUTS[fn]:
                encode_both(twins, enc, arg_of(python[1]), found, f"{label} {fn} ->")
                found.note(f"{label} {fn} -> {enc} (each twin's own round trip)",
                           observe(getattr(twins[0], enc), arg_of(python[1])),
                           observe(getattr(twins[1], enc), arg_of(cython[1])))
    return python_outcomes


def _record_of(module_name_state: Tuple) -> dict:
    return {"@cls": [module_name_state[0], module_name_state[1]], "@s": module_name_state[2]}


def _record_of_json(module_name_text: Tuple) -> dict:
    return {"@cls": [module_name_text[0], module_name_text[1]], "@s": json.loads(module_name_text[2])}


# decoder -> [(encoder, how its output becomes the encoder's argument)]
_ENCODER_INPUTS = {
    "decode_zodb_record": [("encode_zodb_record", lambda v: v)],
    "decode_zodb_record_for_pg": [("encode_zodb_record", _record_of)],
    "decode_zodb_record_for_pg_json": [("encode_zodb_record", _record_of_json)],
    "pickle_to_dict": [("dict_to_pickle", lambda v: v)],
    "pickle_to_json": [("json_to_pickle", lambda v: v)],
}


def pickle_end(data: bytes) -> Optional[int]:
    """Offset just after the first pickle's STOP, or None where pickletools cannot walk it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pickletools on invalid escapes of Python 2 strings
            for op, _, pos in pickletools.genops(io.BytesIO(data)):
                if op.name == "STOP":
                    return pos + 1
    except Exception:  # noqa: BLE001 - damaged data: no split
        return None
    return None


def compare_record(twins, data: bytes, found: Differences, label: str, encode: bool = True) -> None:
    """A record through every decoder, and each of its pickles alone through the single-pickle ones."""
    compare_decoders(twins, data, found, label, encode=encode)
    end = pickle_end(data)
    if end is not None:
        compare_decoders(twins, data[:end], found, f"{label} [class pickle]", PICKLE_DECODERS, encode)
        compare_decoders(twins, data[end:], found, f"{label} [state pickle]", PICKLE_DECODERS, encode)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ---------------------------------------------------------------------------
# The corpora
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_corpus_record_gives_the_same_outcomes(twins, name):
    found = Differences()
    rows = vectors(name)
    for row in rows:
        compare_record(twins, row_record(row), found, f"{name} oid {row['oid']}")
    assert not found, f"{len(found.found)} differences over {len(rows)} records:\n{found.report()}"


def test_the_comparison_sees_what_matters():
    # The strict comparison must tell apart what == does not.
    for a, b in [(1, 1.0), (1, True), (0.0, -0.0), ([1], (1,)), ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
                 (math.nan, -math.nan), ("a", b"a"), ({"x": [1.0]}, {"x": [1]})]:
        assert diff(a, b), (a, b)
    assert diff(math.nan, math.nan) is None and diff({"a": [(1, "x")]}, {"a": [(1, "x")]}) is None
    assert outcome_diff(("raised", ValueError, "a"), ("raised", ValueError, "b"))
    assert outcome_diff(("raised", ValueError, "a"), ("raised", TypeError, "a"))
    assert outcome_diff(("ok", b"a"), ("raised", ValueError, "a"))
    assert outcome_diff(("raised", KeyError, "'x'"), ("raised", KeyError, "'x'")) is None


# Subclasses of the accepted types, some overriding what a Cython twin may bypass.

# Plain ones, overriding nothing: not the exact type, though they behave as it.
SubStr, SubInt, SubFloat, SubList, SubDict, SubBytes, SubTuple = (
    type("Sub" + base.__name__.capitalize(), (base,), {}) for base in (str, int, float, list, dict, bytes, tuple))


class OddStr(str):
    def __str__(self) -> str:
        return "not " + str.__str__(self)


class UnequalStr(str):
    """A key equal to no plain str of its text: a lookup of "@cls" or "@s" does not find it."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return type(other) is UnequalStr and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class OddInt(int):
    def __int__(self) -> int:
        return 7

    def __index__(self) -> int:
        return 8


class OddFloat(float):
    def __float__(self) -> float:
        return 2.5

    def __repr__(self) -> str:
        return "OddFloat"


class OddList(list):
    def __iter__(self):
        return iter(["odd"])

    def __len__(self) -> int:
        return 1


class OddDict(dict):
    def __iter__(self):
        return iter(["odd"])

    def keys(self):
        return ["odd"]

    def items(self):
        return [("odd", 1)]

    def __getitem__(self, key):
        return 1

    def __len__(self) -> int:
        return 1


class Colour(enum.IntEnum):
    RED = 1


Point = collections.namedtuple("Point", "x y")


# ---------------------------------------------------------------------------
# Argument types: the same TypeError (or value) from both
# ---------------------------------------------------------------------------

_SOME_RECORD = pickle.dumps(("m", "C"), 3) + pickle.dumps({"a": 1}, 3)


def _released() -> memoryview:
    view = memoryview(_SOME_RECORD)
    view.release()
    return view


# Buffers of every shape (strided, multi-byte items, released), subclasses of the accepted types, others.
ARGUMENTS = [_SOME_RECORD, bytearray(_SOME_RECORD), memoryview(_SOME_RECORD), memoryview(b"xx" + _SOME_RECORD)[2:],
             memoryview(bytes(b for c in _SOME_RECORD for b in (c, 0)))[::2],
             memoryview(array.array("B", _SOME_RECORD)), memoryview(array.array("H", _SOME_RECORD + b"\0")),
             memoryview(_SOME_RECORD).cast("c"), _released(), SubBytes(_SOME_RECORD), type("Arr", (bytearray,), {})(b"."),
             "text", SubStr('{"a": 1}'), 7, None, [1], 1.5, {"@cls": ["m", "C"], "@s": 1}, '{"a": 1}', ("a",), b"", "",
             collections.OrderedDict([("@cls", ["m", "C"]), ("@s", 1)]), SubDict(a=1), OddDict(a=1)]


@pytest.mark.parametrize("fn", DECODERS + ENCODERS)
def test_every_argument_type_gives_the_same_outcome(twins, fn):
    found = Differences()
    for arg in ARGUMENTS:
        found.note(f"{fn}({arg!r:.60})", *call_both(twins, fn, arg))
    python, cython = twins
    if fn == "encode_zodb_record_from_pg_json":
        kwargs = {"class_mod": "app.mod", "class_name": "Kls", "state_json": '{"a": 1}'}
        for wrong in ("class_mod", "class_name"):
            for arg in ARGUMENTS:
                if type(arg) is not str:
                    args = dict(kwargs, **{wrong: arg})
                    found.note(f"{fn}({wrong}={arg!r:.60})", observe(lambda: python.encode_zodb_record_from_pg_json(**args)),
                               observe(lambda: cython.encode_zodb_record_from_pg_json(**args)))
    else:
        keyword = "json_str" if fn == "json_to_pickle" else "obj" if fn in ENCODERS else "data"
        kwargs = {keyword: '{"a": 1}' if fn == "json_to_pickle" else {"a": 1} if fn in ENCODERS else _SOME_RECORD}
    found.note(f"{fn}(**{kwargs!r:.60})", observe(lambda: getattr(python, fn)(**kwargs)),
               observe(lambda: getattr(cython, fn)(**kwargs)))
    assert not found, found.report()


# ---------------------------------------------------------------------------
# (a) Generated Python values, pickled with protocols 0 to 5
# ---------------------------------------------------------------------------

# The values, states and class pickles: tests/strategies.py (pickled_values, pickled_states, class_pickles).


def _dumps(value: Any, protocol: int) -> bytes:
    try:
        return pickle.dumps(value, protocol)
    except (pickle.PicklingError, TypeError, ValueError, AttributeError):
        assume(False)  # protocols 0 and 1 cannot pickle everything
        raise AssertionError("unreachable")


@SETTINGS
@given(value=pickled_values, protocol=st.integers(0, 5))
def test_pickles_of_python_values(twins, value, protocol):
    data = _dumps(value, protocol)
    found = Differences()
    compare_decoders(twins, data, found, f"pickle {b64(data)}")
    assert not found, found.report()


@SETTINGS
@given(klass=class_pickles(), state=pickled_states, protocol=st.integers(0, 5))
def test_records_of_python_values(twins, klass, state, protocol):
    data = klass + _dumps(state, protocol)
    found = Differences()
    compare_record(twins, data, found, f"record {b64(data)}")
    assert not found, found.report()


def test_records_with_large_texts(twins):
    """Long strings, which the Cython twin's JSON text path leaves in the pickle, in every place."""
    found = Differences()
    for data in large_text_records():
        compare_record(twins, data, found, f"record {b64(data)[:80]}...")
    assert not found, found.report()


@pytest.mark.parametrize("filler", ["a", "é", "中"])
def test_long_strings_utf8_checked_block_by_block(twins, filler):
    """BINUNICODE payloads long enough to stay in the pickle on the compiled pg_json path, which checks their
    UTF-8 32 bytes at a time, with each sequence strict UTF-8 takes or refuses (and U+0000, which such a
    payload must not hold) at every position around those blocks: both twins give the same outcome."""
    size = 4160
    template = record({"text": "Q" * size}, 3)
    python, cython = twins
    found = Differences()
    for payload in utf8_texts(size, filler.encode()):
        data = template.replace(b"Q" * size, payload)
        found.note(f"payload ...{payload[-48:]!r}", observe(python.decode_zodb_record_for_pg_json, data),
                   observe(cython.decode_zodb_record_for_pg_json, data))
    assert not found, found.report()


def test_short_strings_with_an_escape_anywhere(twins):
    """Strings of 0-20 characters with one character that needs escaping (or a non-ASCII one) at
    every position, as keys and as values: the Cython JSON writer and encoder copy short strings word by word."""
    texts = [""] + ["a" * n for n in range(1, 21)]
    for n in range(1, 21):
        for at in range(n):
            for odd in ('"', "\\", "\n", "\x01", "\x1f", "\x7f", "\xe9", "\u20ac", "\U0001f600"):
                texts.append("a" * at + odd + "b" * (n - at - 1))
    state = {"values": texts, "keys": {t: len(t) for t in texts}}
    found = Differences()
    compare_record(twins, pickle.dumps(("m", "C"), 3) + pickle.dumps(state, 3), found, "short strings")
    assert not found, found.report()


def test_strs_of_every_width_through_the_json_writer(twins):
    """Non-ASCII strs through the JSON writers: every mix of UTF-8 lengths in a block of 8 characters, with a
    character to escape at every place of some, and strs of 1-4 KB (4 KB and more escaped without the GIL)."""
    texts = [block + wide for block in MIXED_BLOCKS for wide in ("", "\u4e2d", "\U0001f600")]
    texts += [block[:at] + odd + block[at:] + wide for block in MIXED_BLOCKS[:81] for at in range(9)
              for odd in ('"', "\\", "\n", "\x1f") for wide in ("", "\U0001f600")]
    texts += [wide * n + tail for wide, sizes in (("\xe9", (1000, 1023, 1024, 2000)), ("\u4e2d", (677, 678, 1300)),
                                                  ("\U0001f600", (508, 509, 1020)))
              for n in sizes for tail in ("", '"')]
    state = {"values": texts, "keys": {text: 1 for text in texts}}
    found = Differences()
    compare_record(twins, pickle.dumps(("m", "C"), 3) + pickle.dumps(state, 3), found, "strs of every width")
    assert not found, found.report()


@pytest.mark.parametrize("odd", ["\x80", "\xe9", "\u07ff", "\u4e2d", "\U0001f600"])
def test_big_json_texts_with_a_wide_character_anywhere(twins, odd):
    """decode_zodb_record_for_pg_json makes a JSON text of 16 KB and more into a str without the GIL, its
    ASCII a block of 16 bytes a step: one non-ASCII character (whose width is the str's) at every place
    around the blocks near the text's start and its end, and between two of them."""
    filler = "a" * 17000
    texts = [filler[:at] + odd + filler[at:] for at in range(40)]
    texts += [filler + "b" * at + odd + "c" * (40 - at) for at in range(41)]
    texts += [filler + odd + "d" * at + odd + "e" * 20 for at in range(20)]
    found = Differences()
    for text in texts:
        compare_decoders(twins, record({"text": text}, 3), found, f"{odd!r} in {len(text)}",
                         ("decode_zodb_record_for_pg_json",), encode=False)
    assert not found, found.report()


@pytest.mark.parametrize("size", [33, 48, 65, 4100])
def test_longer_strings_with_escapes_around_the_blocks(twins, size):
    """The JSON writer copies what lies between escapes 32 bytes at a time: one or two characters that need
    escaping (or not: U+007F, non-ASCII) at every place of the last 40, after non-ASCII filler too; 4100
    bytes are escaped without the GIL."""
    texts = []
    for filler in ("a", "\xe9"):
        for at in range(max(0, size - 40), size):
            for odd in ('"', "\\", "\n", "\x01", "\x1f", "\x7f", "\u20ac", '\\"', "\n\n"):
                head = filler * (at // len(filler.encode()))
                texts.append((head + "a" * (at - len(head.encode())) + odd + "b" * size)[:size])
    state = {"values": texts}
    found = Differences()
    compare_record(twins, pickle.dumps(("m", "C"), 3) + pickle.dumps(state, 3), found, f"strings of {size}")
    assert not found, found.report()


def _keep_utf8(text: str) -> None:
    """Have CPython make and keep text's UTF-8, as PyUnicode_AsUTF8AndSize does (the Rust codec calls it)."""
    prototype = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)
    as_utf8 = prototype(("PyUnicode_AsUTF8AndSize", ctypes.pythonapi))  # its own pointer: pythonapi's stays as it is
    try:
        as_utf8(text, None)
    except UnicodeEncodeError:  # a lone surrogate: strict UTF-8 has none, nothing is kept
        pass


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="a str's kept UTF-8 is CPython's")
def test_strs_encode_alike_with_and_without_their_kept_utf8(twins):
    """The Cython encoder makes a str's UTF-8 into the pickle itself, whether or not CPython keeps one with the str
    (ASCII a block of 16 or 8 characters at a time), keeping none: strs of every width with
    one other character or lone surrogate at every place around those blocks, as keys and values."""
    texts = ["x" * at + odd + "y" * (size - at - 1) + width  # width: the str's kind whatever odd is
             for odd in ODD_CHARACTERS for width in ("", "\u4e2d", "\U0001f600")
             for size in (1, 7, 8, 9, 15, 16, 17, 33) for at in range(size)]
    texts += [THREE_BYTE_RUN[:at] + odd + THREE_BYTE_RUN[at:size - 1]
              for odd in NOT_THREE_BYTE for size in (2, 8, 9, 16, 17, 25) for at in range(size)]
    texts += [wide * 5000 + tail for wide in ("\xe9", "\u4e2d", "\U0001f600") for tail in ("", "a", "\ud800")]
    texts += [block + wide for block in MIXED_BLOCKS for wide in ("\u4e2d", "\U0001f600")]  # a 2- or 4-byte str
    texts += ["".join(MIXED_BLOCKS), "".join(MIXED_BLOCKS) + "\U0001f600"]
    python, cython = twins

    def record_of(values: List[str]) -> Dict[str, Any]:
        return {"@cls": ["m", "C"], "@s": {"values": values, "keys": {text: 1 for text in values}}}

    def new_strs() -> List[str]:  # new str objects, as json.loads hands them over: no UTF-8 kept
        return json.loads(json.dumps(texts))

    expected = python.encode_zodb_record(record_of(new_strs()))
    plain = new_strs()
    sizes = [sys.getsizeof(text) for text in plain]
    assert cython.encode_zodb_record(record_of(plain)) == expected
    assert [sys.getsizeof(text) for text in plain] == sizes  # the encoder kept no UTF-8 in them
    kept = new_strs()
    for text in kept:
        _keep_utf8(text)
    assert sum(sys.getsizeof(a) > sys.getsizeof(b) for a, b in zip(kept, plain)) > len(texts) // 2
    assert cython.encode_zodb_record(record_of(kept)) == expected


def test_record_keys_and_names_that_look_alike(twins):
    """encode_zodb_record reads "@cls" and "@s" by comparing bytes and tests for an empty module and
    name by length: keys one letter off, non-ASCII, extra or missing, and empty names of str subclasses."""
    keys = ["@cls", "@s", "@cl", "@clss", "@clt", "@CLS", "@S", "@sx", "@", "s", "cls", "@cl\xe9", "@\u0161", 1]
    found = Differences()
    for first in keys:
        for second in keys:
            record = {first: ["m", "C"], second: {"a": 1}}
            encode_both(twins, "encode_zodb_record", record, found, repr(record))
    state = {"@obj": {"@cls": ["m", "C"]}, "@state": {"a": 1}}
    for module in ("", SubStr(""), OddStr(""), "m"):
        for name in ("", SubStr(""), OddStr("")):
            record = {"@cls": [module, name], "@s": state}
            encode_both(twins, "encode_zodb_record", record, found, repr(record))
    assert not found, found.report()


def test_records_on_either_side_of_the_usual_path(twins):
    """The Cython encoder writes a record of two ASCII names (the module not empty) and a state that is not a
    dict of one or two keys the record reads ("@pkl", "@args" with "@state") on a path of its own: every
    shape one step off it goes the general way, and both must give what the Python twin gives."""
    b64 = base64.b64encode(pickle.dumps({"a": 1}, 3)).decode()
    classes = [["m", "C"], ["BTrees.OOBTree", "OOBTree"], ["BTrees.Length", "Length"], ["", "C"], ["m", ""],
               ["", ""], ["m\xe9", "C"], ["m", "C\u0161"], [SubStr("m"), "C"], ["m", OddStr("C")], ("m", "C"),
               ["m", "C", "D"], ["m"], "m.C"]
    states = [None, 5, "text", [1, "a"], {}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3},
              {"@pkl": b64}, {"@pkl": b64, "a": 1}, {SubStr("@pkl"): b64}, {"@pkl": 5},
              {"@args": [1], "@state": {"a": 1}}, {"@args": [1]}, {"@args": [1], "@other": 2},
              {"@state": {"a": 1}, "x": 1}, {SubStr("@args"): [1], "@state": {"a": 1}}, {1: "a"},
              {"@kv": [["k", 1]]}, {"@obj": {"@cls": ["m", "C"]}, "@state": {"a": 1}}]
    found = Differences()
    for cls in classes:
        for state in states:
            for record in ({"@cls": cls, "@s": state}, {"@s": state, "@cls": cls}, {"@cls": cls}):
                encode_both(twins, "encode_zodb_record", record, found, repr(record))
    # The record dict itself, one step off the two keys the usual path reads in one look (zjc_dict_pair).
    deleted = {"@cls": ["m", "C"], "x": 1, "@s": {"a": 1}}
    del deleted["x"]
    records = [deleted, {SubStr("@cls"): ["m", "C"], "@s": 5}, {"@cls": ["m", "C"], SubStr("@s"): 5},
               {"@cls": ["m", "C"], "@t": 5}, {"@clsx": ["m", "C"], "@s": 5}, {"@cls": ["m", "C"], 1: 5},
               {"@cls": ["m", "C"], "@s": 5, "x": 1}, SubDict({"@cls": ["m", "C"], "@s": 5}),
               {"@cl\xe9": ["m", "C"], "@s": 5}, {"@cls": ["m", "C"], "@\u0161": 5},
               {UnequalStr("@cls"): ["m", "C"], "@s": 5}, {"@cls": ["m", "C"], UnequalStr("@s"): 5}]
    for record in records:
        encode_both(twins, "encode_zodb_record", record, found, repr(record))
    assert not found, found.report()


def test_reduce_markers_of_every_shape(twins):
    """@reduce and @newobj dicts with every allowed key alone and together, each key one step off (another
    key, a str subclass, not a str, missing), the {"@args", "@kwargs"} of a NEWOBJ_EX, other containers, and
    markers with a second key or inside a list: both twins give the same output or error."""
    cls = {"@cls": ["builtins", "complex"]}
    usual = {"callable": cls, "args": {"@t": [1, 2]}}
    extras = [{}, {"state": {"a": 1}}, {"items": [["k", 1]]}, {"appends": [1, 2]}, {"kwargs": {"x": 1}},
              {"state": None, "items": [], "appends": []}, {"state": 5, "items": [["k", 1]], "appends": [3]},
              {"other": 1}, {SubStr("state"): 1}, {1: 2}, {"items": 5}, {"appends": "x"}, {"items": [[1]]}]
    inners: List[Any] = [{**usual, **extra} for extra in extras]
    inners += [{"callable": cls}, {"args": {"@t": []}}, {}, {"callable": cls, "args": {"a": 1}},
               {"callable": cls, "args": {"@args": {"@t": [1]}, "@kwargs": {"x": 1}}},
               {"callable": cls, "args": {"@args": {"@t": [1]}, "@kwargs": {"x": 1}}, "kwargs": {"y": 2}},
               {SubStr("callable"): cls, "args": {"@t": []}}, {"callable": cls, SubStr("args"): {"@t": []}},
               {"args": {"@t": []}, "callable": cls}, {"callable": cls, "args": [1]}, {"callable": cls, "args": None},
               SubDict(usual), OddDict(), ["callable", "args"], None]
    found = Differences()
    for inner in inners:
        for marker in ("@reduce", "@newobj"):
            for state in ({marker: inner}, {marker: inner, "x": 1}, [{marker: inner}]):
                record = {"@cls": ["m", "C"], "@s": state}
                encode_both(twins, "encode_zodb_record", record, found, repr(record))
    assert not found, found.report()


def test_dict_keys_of_every_length_and_kind(twins):
    """The compiled encoder writes a plain ASCII key straight from the str (its short copies end at 3, 7, 8
    and 16 bytes) and sends keys starting with "@" to the escape check: keys of every length up to 40, ASCII
    and not, "@" keys escaped and not, with values the walk writes itself and values it hands on."""
    keys = [c * n for n in range(41) for c in ("k", "\xe9", "\u4e2d", "\U0001f600")]
    keys += ["@", "@n", "@ns", "@ns:", "@ns:AA==", "@ns:AGE=", "@su:7aCA", "@nsx", "@suAA", "@t", "@abc" * 5, "@\xe9:x",
             "@ns:\xe9", "\x00", "a\x00b", SubStr("sub"), 1, 2.5, None, True]
    values = ["v", "", "\xe9" * 9, 1, -(2**70), 1.5, None, True, False, [1], {"@t": [1]}, {"k": "v"}, b"b", SubStr("s")]
    found = Differences()
    for i, value in enumerate(values):
        state = {key: value for key in keys}
        for fn, wrap in (("encode_zodb_record", lambda v: {"@cls": ["m", "C"], "@s": v}),
                         ("dict_to_pickle", lambda v: {"v": v})):
            encode_both(twins, fn, wrap(state), found, f"value {i} {value!r}")
    assert not found, found.report()


#: @tz values around the compiled encoder's pytz zone ({"pytz": [...], "name": ...} of strs and ints after a
#: naive @dt, written in C): the shapes it takes and the ones it leaves to the Python rules.
PYTZ_ZONES = [
    {"pytz": ["US/Eastern", -18000, 0, "EST"], "name": "US/Eastern"}, {"name": "UTC", "pytz": ["UTC"]},
    {"pytz": ["A", 1], "name": 1}, {"pytz": ["A", 1, 2], "name": None}, {"pytz": ["A", 2**70, -(2**70)], "name": ""},
    {"pytz": ["A", "\xe9", "\U0001f600", 0, 1, 2], "name": "x"}, {"pytz": [], "name": "x"},
    {"pytz": [True], "name": "x"}, {"pytz": [1.5], "name": "x"}, {"pytz": [["A"]], "name": "x"},
    {"pytz": [SubStr("A")], "name": "x"}, {"pytz": "A", "name": "x"}, {"pytz": ["A"]}, {"nam": "x", "pytz": ["A"]},
    {"pytz": ["A"], "name": "x", "other": 1}, {"zoneinfo": "Europe/Berlin"}, {1: "x", "pytz": ["A"]}, {}, None,
]
PYTZ_TEXTS = ["2021-12-14T21:58:26", "2021-12-14T21:58:26.000005", "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999",
              "2021-12-14T21:58:26+01:00", "2021-12-14T21:58:26Z", "2021-13-14T21:58:26", "2021-12-14T24:00:00",
              "2021-12-14", "2021-12-14T21:58", "2021-12-14T21:58:26.", "x", "", 5, "2021-12-14T21:58:26\xe9"]


def test_datetimes_with_pytz_zones(twins, monkeypatch):
    """A naive @dt with a pytz @tz (every such datetime decode_zodb_record writes) is written in C by the
    compiled encoder: the same bytes or error as the Python rules for every shape around it, and for the
    decoder's own form no call of those rules."""
    found = Differences()
    for tz in PYTZ_ZONES:
        for text in PYTZ_TEXTS:
            marker = {"@dt": text} if tz is None else {"@dt": text, "@tz": tz}
            encode_both(twins, "encode_zodb_record", {"@cls": ["m", "C"], "@s": {"when": marker}}, found, repr(marker))
    assert not found, found.report()
    when = pytz.timezone("US/Eastern").localize(datetime.datetime(2021, 12, 14, 21, 58, 26, 5))
    decoded = {"@cls": ["m", "C"], "@s": {"when": twins[0].decode_zodb_record(record(when))["@s"]}}
    assert set(decoded["@s"]["when"]) == {"@dt", "@tz"} and "pytz" in decoded["@s"]["when"]["@tz"]
    expected = twins[0].encode_zodb_record(decoded)
    if twins[1].name == "cython":
        from zodb_json_codec import _encode_known

        def refused(*args):
            raise AssertionError("the Python rules were called")
        monkeypatch.setattr(_encode_known, "datetime_call", refused)
    assert twins[1].encode_zodb_record(decoded) == expected


def test_btree_pairs_with_another_kind_anywhere(twins):
    """The compiled encoder writes @kv pairs of scalars as it checks them and takes back what it wrote when
    a pair is of another kind (a container, a marker, a malformed pair): at every position of 1 to 4 pairs."""
    odd_pairs = [[1, {"@t": [1]}], [[1], 2], [{"k": 1}, "v"], [1, b"b"], [1, SubStr("s")], [1], [1, 2, 3], [], "pair",
                 (1, 2), None, [2**70, -(2**70)], ["\xe9", "\U0001f600"], [1.5, None], [True, False]]
    found = Differences()
    for size in range(1, 5):
        for at in range(size):
            for odd in odd_pairs:
                pairs = [[f"k{i}", i] for i in range(size)]
                pairs[at] = odd
                for klass in (["BTrees.OOBTree", "OOBucket"], ["BTrees.OOBTree", "OOBTree"]):
                    for state in ({"@kv": pairs}, {"@kv": pairs, "@next": None}):
                        encode_both(twins, "encode_zodb_record", {"@cls": klass, "@s": state}, found,
                                    f"{klass[1]} {state!r}")
    assert not found, found.report()


def test_pg_json_rows_with_empty_class_names(twins):
    """Rows with an empty module or name (object records among them), str subclasses too: the same
    bytes or error from both twins' encode_zodb_record_from_pg_json."""
    texts = ['{"@obj":{"@ref":{"@b":"AAAAAAAAAAE="}},"@state":{"y":5}}', '{"a":1}', '5', '{"@obj":1}']
    found = Differences()
    for module, name in (("", ""), ("", "C"), ("m", ""), (SubStr(""), ""), ("", OddStr(""))):
        for text in texts:
            label = f"{module!r}.{name!r} {text}"
            found.note(label, *(observe(twin.encode_zodb_record_from_pg_json, module, name, text) for twin in twins))
    assert not found, found.report()


# Names at the edges of the compiled twins' byte compares (_classnames.btree_bits) and NUL search.
EDGE_CLASSES = [(m, n) for m in ("BTrees.", "BTrees.Length", "BTrees.Lengthy", "BTrees.Lengt", "BTrees.OOBTree",
                                 "BTrees.\xe9", "BTrees.\u4e2d", "BTrees.\U0001f600", "BTrees", "btrees.OOBTree",
                                 "XBTrees.OOBTree", "BTrees\u4e2dLength")
                 for n in ("BTree", "OOBTree", "Bucket", "TreeSet", "Set", "Length", "S", "", "\xe9BTree",
                           "OOSet\xe9", "Tree\u4e2dSet", "\U0001f600Bucket", "\U0001f600Set\U0001f600")]
EDGE_CLASSES += [("m\x00", "C"), ("m", "C\x00"), ("\x00", "C"), ("\xe9\x00", "C"), ("m", "\u4e2d\x00\u4e2d"),
                 ("\U0001f600", "\x00")]


def test_class_names_at_the_edges(twins):
    found = Differences()
    for module, name in EDGE_CLASSES:
        for state in (((1, 2),), {"a": 1}, ((((3, 4),),), None), 5):
            data = pickle.dumps((module, name), 3) + pickle.dumps(state, 3)
            compare_record(twins, data, found, f"{module!r}.{name!r} {state!r}")
    assert not found, found.report()


def _class_pickle(form: str, module: bytes, name: bytes, protocol: int = 3) -> bytes:
    """A record's class pickle as ZODB writes it ("global"), as the Rust codec's shapes do ("text"), as both
    codecs' encode_zodb_record write it ("encoded": ((module, name), None), no memo), or as a pickler writes
    ((module, name), None) and ((module, name), (1,)) ("encoded memo", "encoded args")."""
    head = b"\x80" + bytes([protocol])
    if form == "global":
        return head + b"c" + module + b"\n" + name + b"\nq\x00."
    texts = [b"X" + struct.pack("<I", len(s)) + s for s in (module, name)]
    if form == "encoded":
        return head + b"".join(texts) + b"\x86N\x86."
    if form == "encoded args":
        return head + b"".join(texts) + b"\x86K\x01\x85\x86."
    text = b"".join(t + b"q" + bytes([i]) for i, t in enumerate(texts))
    if form == "encoded memo":
        return head + text + b"\x86q\x02Nh\x02\x86q\x03."
    return head + text + b"\x86q\x02."


# State pickles that GET the class pickle's memo entries (one memo for both, as ZODB's pickler has it),
# overwrite them first, GET one that is not there, or MEMOIZE after them (protocol 4).
_STATES_USING_THE_CLASS_MEMO = [b"\x80\x03K\x01.", b"\x80\x03h\x00.", b"\x80\x03h\x00h\x00\x86.", b"\x80\x03h\x01.",
                                b"\x80\x03h\x02h\x02\x86.", b"\x80\x03]q\x03(h\x00h\x01h\x02e.",
                                b"\x80\x03}q\x03(X\x01\x00\x00\x00ah\x00X\x01\x00\x00\x00bh\x00u.",
                                b"\x80\x03K\x05q\x00h\x00.", b"\x80\x03K\x05q\x02h\x02h\x00\x86.", b"\x80\x03h\x03.",
                                b"\x80\x04K\x07\x94(h\x00h\x01t.", b"\x80\x04K\x07\x94(h\x00h\x01h\x02h\x03t."]
_NAMES = [(b"m", b"C"), (b"persistent.mapping", b"PersistentMapping"), (b"BTrees.OOBTree", b"OOBTree"),
          (b"BTrees.Length", b"Length"), (b"m x", b"C"), (b"m\t", b"C"), (b"m", b"C\x7f"), (b"m\xc3\xa9", b"C"),
          (b"m", b"\xe4\xb8\xad"), (b"", b"C"), (b"m", b""), (b"m\x00", b"C"), (b"!", b"~"), (b"m", b"C\xff")]


def test_usual_class_pickles_and_their_memo(twins):
    """The compiled decoder reads the three usual forms of class pickle as bytes and makes the class marker
    in the memo only if the state GETs it: names at the edges of that reading, every protocol, the pattern
    cut short or one byte off, and states that GET, overwrite or miss the class pickle's memo entries.  The
    other ((module, name), arguments) forms go through the pickle machine and a reading in C."""
    found = Differences()
    for form in ("global", "text", "encoded", "encoded memo", "encoded args"):
        for module, name in _NAMES:
            for protocol in (1, 2, 3, 4):
                for state in _STATES_USING_THE_CLASS_MEMO:
                    data = _class_pickle(form, module, name, protocol) + state
                    compare_record(twins, data, found, f"{form} {module!r}.{name!r} {protocol} {state!r}")
        klass = _class_pickle(form, b"m", b"C")
        for end in range(len(klass)):
            for data in (klass[:end], klass[:end] + klass[end + 1:] + b"\x80\x03h\x00.",
                         klass[:end] + b"\x00" + klass[end + 1:] + b"\x80\x03K\x01."):
                compare_record(twins, data, found, f"{form} {data!r}")
    assert not found, found.report()


#: {"@cls": x} dicts a pickle builds itself (MARK... SETITEM), as the class of a persistent id: x None, an int,
#: an empty list, or [module, name] built by LIST (which such a dict gets escaped for: no class marker either).
_LOOKALIKE_CLASSES = [b"N", b"K\x05", b"]", b"(X\x01\x00\x00\x00mX\x02\x00\x00\x00Cll"]


def _lookalike_ref(klass: bytes, last: int) -> bytes:
    """BINPERSID of (8-byte oid, {"@cls": klass}) (a MARK'ed tuple)."""
    return b"(C\x08" + b"\x00" * 7 + bytes([last]) + b"}X\x04\x00\x00\x00@cls" + klass + b"stQ"


def test_references_to_lookalike_class_markers(twins):
    """Both twins read such references alike, two to a record in every order: the compiled decoder keeps the
    last class it named for the next reference, and must not take any other payload for that one."""
    found = Differences()
    head = b"\x80\x03cm\nC\nq\x00."
    for first in _LOOKALIKE_CLASSES:
        for second in _LOOKALIKE_CLASSES:
            state = (b"\x80\x03}(X\x01\x00\x00\x00a" + _lookalike_ref(first, 1)
                     + b"X\x01\x00\x00\x00b" + _lookalike_ref(second, 2) + b"u.")
            compare_record(twins, head + state, found, f"{first!r} then {second!r}")
    assert not found, found.report()


_OID = b"C\x08" + b"\x00" * 7 + b"\x01"
_OTHER_OID = b"C\x08" + b"\x00" * 7 + b"\x02"


def _pid_ref(put: bytes, klass: bytes = b"h\x00", oid: bytes = _OID) -> bytes:
    """ZODB's reference: BINPERSID of (oid, class), the tuple memoized by put (b"" for none)."""
    return oid + b"q\x01" + klass + b"\x86" + put + b"Q"


def _in_dict(*values: bytes) -> bytes:
    """A state pickle of a dict holding the values under "a", "b", ..."""
    items = b"".join(b"X\x01\x00\x00\x00" + bytes([97 + i]) + v for i, v in enumerate(values))
    return b"\x80\x03}(" + items + b"u."


_FAR_PUT, _FAR_GET = b"r" + struct.pack("<I", 100000), b"j" + struct.pack("<I", 100000)
# States whose references are read at once (TUPLE2, BINPUT, BINPERSID fused) or must not be, and whose pid
# tuples are fetched again from the memo, changed, overwritten, or put at an index far beyond the others.
_PID_STATES = {
    "fetched": _in_dict(_pid_ref(b"q\x02"), b"h\x02"),
    "fetched twice": _in_dict(_pid_ref(b"q\x02"), b"h\x02", b"h\x02"),
    "fetched and changed": _in_dict(_pid_ref(b"q\x02"), b"h\x02X\x01\x00\x00\x00kK\x01s", b"h\x02"),
    "fetched, its list changed": _in_dict(_pid_ref(b"q\x02"), b"h\x02", b"h\x02X\x02\x00\x00\x00@t]s"),
    "no put": _in_dict(_pid_ref(b""), _pid_ref(b"")),
    "long put": _in_dict(_pid_ref(b"r\x02\x00\x00\x00"), b"j\x02\x00\x00\x00"),
    "far put": _in_dict(_pid_ref(_FAR_PUT), _FAR_GET, _FAR_GET),
    "overwritten": _in_dict(_pid_ref(b"q\x02"), b"K\x05q\x020h\x02"),
    "overwritten by another": _in_dict(_pid_ref(b"q\x02"), _pid_ref(b"q\x02", oid=_OTHER_OID), b"h\x02"),
    "class None": _in_dict(_pid_ref(b"q\x02", b"N"), b"h\x02"),
    "dotted class": _in_dict(_pid_ref(b"q\x02", b"cm\nC.D\nq\x05"), b"h\x02", _pid_ref(b"q\x03", b"h\x05")),
    "class as text": _in_dict(_pid_ref(b"q\x02", b"X\x01\x00\x00\x00m"), b"h\x02"),
    "an older oid": _in_dict(_OTHER_OID + b"q\x030" + _OID + b"q\x010h\x03h\x00\x86q\x02Q", b"h\x02"),
    "the oid fetched again": _in_dict(_pid_ref(b"q\x02"), b"h\x01h\x00\x86q\x03Q", b"h\x03"),
    "a short oid": _in_dict(b"C\x07" + b"\x00" * 6 + b"\x01q\x01h\x00\x86q\x02Q", b"h\x02"),
    "memoize": b"\x80\x04}(X\x01\x00\x00\x00a" + _pid_ref(b"\x94") + b"X\x01\x00\x00\x00bh\x02u.",
    "across a mark": _in_dict(_OID + b"q\x01(h\x00\x86q\x02Q"),
    "cut after the put": b"\x80\x03" + _pid_ref(b"q\x02")[:-1],
    "cut in the long put": b"\x80\x03" + _pid_ref(b"r\x02\x00")[:-1],
    "in a list": b"\x80\x03](" + _pid_ref(b"q\x02") + _pid_ref(b"q\x03", b"N") + b"h\x02h\x03e.",
}


def test_references_read_at_once_and_their_pid_tuples(twins):
    """The compiled decoder reads ZODB's (oid, class) reference in one step and makes its pid tuple's
    {"@t": [...]} only if the memo is asked for it: both twins give the same on every such pickle."""
    found = Differences()
    for label, state in _PID_STATES.items():
        compare_record(twins, b"\x80\x03cm\nC\nq\x00." + state, found, label)
    assert not found, found.report()


def test_records_as_zodb_writes_them(twins):
    # The property tests' own records (zodbpickle, one memo for both pickles,
    # persistent references, application objects), compared here.
    @SETTINGS
    @given(rec=records())
    def check(rec):
        data = rec[0]
        found = Differences()
        compare_record(twins, data, found, f"record {b64(data)}")
        assert not found, found.report()

    check()


# ---------------------------------------------------------------------------
# (b) Damaged corpus records
# ---------------------------------------------------------------------------

def _samples() -> List[bytes]:
    """The smallest record of each class in both corpora (up to 3 kB): damage reaches every mapping."""
    picked: Dict[Tuple[str, str], bytes] = {}
    for name in NAMES:
        for row in vectors(name):
            data = row_record(row)
            key = tuple(row["pg_json"][:2]) if row["pg_json"] else ("", row["oid"])
            if len(data) <= 3000 and (key not in picked or len(data) < len(picked[key])):
                picked[key] = data
    return [picked[k] for k in sorted(picked)]


SAMPLES = _samples()
# Opcodes and arguments worth inserting: lengths, memo indices, stack shapes, unknown opcodes, huge sizes.
SPLICE = [bytes([b]) for b in b"()]}tld\x85\x86\x87RbQP\x81\x92\x8f\x90\x91\x93\x94\x95ioqhrjgpXBCTUS\x8c\x8d"
                                 b"\x8e\x8a\x8bsuae0122KJMGFILV\x80.\x82\x96\x97\x98\xff\x00"]
HUGE = [b"\xff\xff\xff\x7f", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\xff" * 8, b"\xff" * 7 + b"\x7f"]


@st.composite
def damaged(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "huge", "repeat"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[i:i] = draw(st.sampled_from(SPLICE)) + draw(st.one_of(st.sampled_from(HUGE), st.binary(max_size=3)))
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[i:]
        elif kind == "huge":
            huge = draw(st.sampled_from(HUGE))
            data[i:i + len(huge)] = huge
        else:  # a piece of itself again: memo entries, marks and containers out of place
            j = draw(st.integers(0, max(len(data) - 1, 0)))
            data[i:i] = data[j:j + draw(st.integers(1, 40))]
    return bytes(data)


@SETTINGS
@given(data=damaged())
def test_damaged_records(twins, data):
    found = Differences()
    python = compare_decoders(twins, data, found, f"record {b64(data)}")
    for end in {pickle_end(data), data.find(b".\x80") + 1}:  # the state pickle, or where it seems to start
        if end:
            python.update({f"{fn} [from {end}]": o for fn, o in
                         compare_decoders(twins, data[end:], found, f"state {b64(data[end:])}",
                                          PICKLE_DECODERS).items()})
    assert not found, found.report()
    # Nothing but ValueError escapes, checked on the normative twin (the other one gave the same):
    escaped = {fn: describe(o) for fn, o in python.items() if o[0] == "raised" and not issubclass(o[1], ValueError)}
    assert not escaped, (b64(data), escaped)


def test_the_samples_cover_many_classes():
    assert len(SAMPLES) >= 20


# ---------------------------------------------------------------------------
# (c) Marker trees and JSON texts through the encoders
# ---------------------------------------------------------------------------

B64 = [base64.b64encode(b).decode() for b in (b"", b"a", b"ab", b"abc", b"\x00" * 9)] + ["YQ", "not base64!", "===="]
json_junk = st.one_of(st.none(), st.booleans(), ints, floats, any_texts, st.sampled_from(B64), st.builds(list),
                      st.builds(dict), st.lists(ints, max_size=3))
junk = st.one_of(json_junk, st.binary(max_size=4), st.just((1,)))
json_leaves = st.one_of(st.none(), st.booleans(), ints, floats, any_texts)
PAYLOADS = {
    "@b": st.sampled_from(B64), "@bi": st.one_of(ints.map(str), any_texts), "@pkl": st.sampled_from(B64 + ["gAN9cQAu"]),
    "@dt": st.one_of(st.datetimes().map(datetime.datetime.isoformat), any_texts),
    "@date": st.one_of(st.dates().map(datetime.date.isoformat), any_texts),
    "@time": st.one_of(st.times().map(datetime.time.isoformat), any_texts),
    "@td": st.lists(ints, min_size=2, max_size=4), "@dec": st.one_of(decimals.map(str), any_texts),
    "@uuid": st.one_of(st.uuids().map(lambda u: u.hex), any_texts),
    "@f": st.sampled_from(["nan", "inf", "-inf", "-0.0", "1e+16", "NaNa", "", "1e999", "0x1p3"]),
    "@ns": st.sampled_from(B64), "@su": st.sampled_from(B64 + ["7aCA"]),
    "@ref": st.one_of(st.sampled_from(["0000000000000001", "zz", ""]),
                      st.lists(st.sampled_from(["0000000000000001", "m.C", "zz", ""]), max_size=3)),
}
TZS = [{"zoneinfo": "UTC"}, {"zoneinfo": "Nowhere/Else"}, {"pytz": ["UTC"], "name": "UTC"}, {"offset": 3600},
       {"x": 1}, {}]


def _markers(children, junk):
    """Marker dicts: the shapes the encoders dispatch on, with fitting, wrong and random payloads."""
    payload = st.sampled_from(sorted(PAYLOADS)).flatmap(lambda k: st.one_of(PAYLOADS[k], junk).map(lambda v: {k: v}))
    return st.one_of(
        payload,
        st.builds(lambda k, v: {k: v}, st.sampled_from(MARKER_KEYS), st.one_of(children, junk)),
        st.dictionaries(st.sampled_from(MARKER_KEYS), st.one_of(children, junk), min_size=2, max_size=3),
        st.builds(lambda v: {"@t": v}, st.lists(children, max_size=3)),
        st.builds(lambda v: {"@set": v}, st.lists(children, max_size=3)),
        st.builds(lambda v: {"@fset": v}, st.lists(children, max_size=3)),
        st.builds(lambda v: {"@d": v}, st.lists(st.one_of(st.lists(children, min_size=2, max_size=2),
                                                          st.lists(children, max_size=3)), max_size=3)),
        st.builds(lambda c, s: {"@cls": c, "@s": s}, st.sampled_from([["m", "C"], ["m"], "m.C", ["m", 1]]), children),
        st.builds(lambda s, i: {"@cls": ["m", "C"], "@s": s, "@items": i}, children,
                  st.lists(st.lists(children, max_size=2), max_size=2)),
        st.builds(lambda c, a: {"@reduce": {"callable": c, "args": a}},
                  st.one_of(st.just({"@cls": ["m", "f"]}), children), st.one_of(children, junk)),
        st.builds(lambda c, a: {"@newobj": {"callable": c, "args": a}},
                  st.one_of(st.just({"@cls": ["m", "C"]}), children), children),
        st.builds(lambda d, t: {"@dt": d, "@tz": t}, PAYLOADS["@dt"], st.one_of(st.sampled_from(TZS), children)),
        st.builds(lambda d, t: {"@time": d, "@tz": t}, PAYLOADS["@time"], st.one_of(st.sampled_from(TZS), children)),
        st.builds(lambda a, s: {"@args": a, "@state": s}, children, children),
        st.builds(lambda kv, n: {"@kv": kv, "@next": n}, st.lists(st.lists(children, max_size=2), max_size=3),
                  children),
        st.builds(lambda c, f: {"@children": c, "@first": f}, st.lists(children, max_size=3), children),
    )


def _trees(leaf, junk):
    return st.recursive(leaf, lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(pickled_marker_keys, children, max_size=3),
        _markers(children, junk)), max_leaves=12)


json_trees = _trees(json_leaves, json_junk)
# The dict encoders take Python values too: tuples, sets, bytes, datetimes...
python_trees = _trees(st.one_of(json_leaves, pickled_leaves, st.lists(pickled_hashable_leaves, max_size=2).map(tuple),
                                st.frozensets(pickled_hashable_leaves, max_size=2)), junk)
record_classes = st.one_of(st.sampled_from([["m", "C"], ["BTrees.OOBTree", "OOBTree"], ["BTrees.OOBTree", "OOBucket"],
                                            ["BTrees.IIBTree", "IITreeSet"], ["BTrees.OIBTree", "OISet"]]),
                           st.lists(any_texts, min_size=2, max_size=2))


def compare_encoders(twins, tree: Any, cls: list, found: Differences) -> None:
    label = f"tree {tree!r}"[:2000]
    encode_both(twins, "encode_zodb_record", {"@cls": cls, "@s": tree}, found, f"{label} in class {cls!r}")
    encode_both(twins, "encode_zodb_record", tree, found, label)
    encode_both(twins, "dict_to_pickle", tree, found, label)
    encode_both(twins, "dict_to_pickle", {"v": tree}, found, label + " under 'v'")
    try:
        text = json.dumps(tree, ensure_ascii=False)  # NaN and Infinity come out as such: not JSON
    except (TypeError, ValueError):  # not JSON types (the trees are a dozen leaves: never deep)
        return
    found.note(f"json_to_pickle({text!r})", *call_both(twins, "json_to_pickle", text))


@pytest.mark.parametrize("trees", [json_trees, python_trees], ids=["json", "python"])
@SETTINGS
@given(data=st.data(), cls=record_classes)
def test_marker_trees(twins, trees, data, cls):
    tree = data.draw(trees, label="tree")
    found = Differences()
    compare_encoders(twins, tree, cls, found)
    assert not found, found.report()


def _nodes(tree: Any, path: Tuple = ()) -> List[Tuple]:
    """Paths to every node of a decoded tree (dicts and lists)."""
    found = [path]
    if type(tree) is dict:
        for k, v in tree.items():
            found += _nodes(v, path + (k,))
    elif type(tree) is list:
        for i, v in enumerate(tree):
            found += _nodes(v, path + (i,))
    return found


def _damage(tree: Any, path: Tuple, how: str, new: Any) -> Any:
    """tree with the node at path replaced by new, dropped, or wrapped."""
    if not path:
        return {"@t": tree} if how == "wrap" else new
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "drop":
        del parent[last]
    elif how == "wrap":
        parent[last] = [parent[last]] if type(parent) is dict else {"@t": parent[last]}
    else:
        parent[last] = new
    return tree


@SETTINGS
@given(value=pickled_values, data=st.data())
def test_decoded_trees_damaged(twins, value, data):
    # Real marker trees (what the Python twin makes of pickled values), one node then spoiled.
    pickled = _dumps({"v": value}, 3)
    tree = twins[0].pickle_to_dict(pickled)
    for _ in range(data.draw(st.integers(1, 2))):
        path = data.draw(st.sampled_from(_nodes(tree)))
        how = data.draw(st.sampled_from(["replace", "drop", "wrap"]))
        tree = _damage(tree, path, how, data.draw(st.one_of(junk, st.sampled_from(MARKER_KEYS))))
    found = Differences()
    compare_encoders(twins, tree, ["m", "C"], found)
    assert not found, found.report()


# JSON text the codec reads its own way (numbers exact, key order kept): spellings and damage.
JSON_TEXTS = ["", " ", "{}", " {} ", "{}\n", "\ufeff{}", "[]", "1", "-0", "-0.0", "1.0", "1e2", "1E400", "-1e-400",
              "0.1", "12345678901234567890", "1" * 5000, "true", "null", '"x"', "[1,]", "[1,2", "{", "}",
              '{"a":1,"a":2}', '{"a":1,"b":2,"a":3}', '"\\ud800"', '"\\udc80\\ud800"', '"\\u0000"', '"\x00"',
              '"\x1f"', "NaN", "[Infinity]", "[-Infinity]", '{"@f":"nan"}', '{"@t":[1,2]}', '{"@t":[1,2],"x":1}',
              '{"@b":"YQ=="}', '{"@b":"YQ"}', '{"@pkl":"gAN9cQAu"}', '{"@pkl":"gAN9"}', '{"a":1} x', "[01]",
              "[1.]", "[.1]", "[+1]", "[1e]", '["\\x"]', '["\\u12"]', "[tru]", '{"a" 1}', '{1:2}', "[" * 1100,
              '{"@d":[[1,2],[3]]}', '{"@set":[[1]]}', '{"@dt":"2020-01-01T00:00:00","@tz":{"zoneinfo":"UTC"}}',
              '{"@ref":"0000000000000001"}', '{"@ref":["0000000000000001","m.C"]}', '{"@cls":["m","C"],"@s":1}',
              '{"@reduce":{"callable":{"@cls":["os","system"]},"args":{"@t":["x"]}}}', '{"\\u0000":1}']


@pytest.mark.parametrize("text", JSON_TEXTS, ids=lambda t: repr(t[:30]))
def test_json_texts(twins, text):
    found = Differences()
    found.note(f"json_to_pickle({text[:200]!r})", *call_both(twins, "json_to_pickle", text))
    assert not found, found.report()


JSON_INSERTS = list(',:[]{}"\\ 0-eE.+x\x00\ud800') + ["\\u", "NaN"]


@SETTINGS
@given(tree=json_trees, data=st.data())
def test_damaged_json_texts(twins, tree, data):
    text = json.dumps(tree, ensure_ascii=data.draw(st.booleans()), indent=data.draw(st.sampled_from([None, 1])))
    for _ in range(data.draw(st.integers(1, 2))):
        i = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["truncate", "insert", "delete"]))
        if kind == "truncate":
            text = text[:i]
        elif kind == "insert":
            text = text[:i] + data.draw(st.sampled_from(JSON_INSERTS)) + text[i:]
        else:
            text = text[:i] + text[i + 1:]
    found = Differences()
    found.note(f"json_to_pickle({text!r})", *call_both(twins, "json_to_pickle", text))
    assert not found, found.report()


# ---------------------------------------------------------------------------
# Where two implementations of one rule part most easily
# ---------------------------------------------------------------------------

# Text-line opcodes (protocol 0): their arguments are parsed, and Python's
# int() and float() take spellings (" 1", "1_0", "0x1f", "+.5", "nan") a
# parser written in C may not.
LINE_CHARS = "0123456789+-_ .eExXoObBjJlLnaifINF'\"\\\t\r\x00\xff\xc3\xa9uU"
lines = st.one_of(st.text(st.sampled_from(LINE_CHARS), max_size=10).map(lambda t: t.encode("latin-1")),
                  st.sampled_from([b"01", b"00", b"0", b"-0", b"1L", b"-1L", b"L", b"1e+16", b"inf", b"-nan", b"1_0",
                                   b"0x10", b"0o7", b"0b1", b" 5 ", b"+5", b"5.", b".5", b"'a'", b'"a"', b"'a",
                                   b"'\\x'", b"'\\x4'", b"'\\n'", b"\\u00e9", b"\\U0001F600", b"\\ud800",
                                   b"99999999999999999999", b"1" * 4001, b"-" + b"9" * 5000]),
                  st.binary(max_size=6))


@st.composite
def text_opcode_pickles(draw) -> bytes:
    op = draw(st.sampled_from([b"I", b"L", b"F", b"S", b"V", b"P", b"g", b"p", b"c", b"i", b"a"]))
    first = draw(lines)
    if op in (b"c", b"i"):  # two lines: module and name
        body = op + first + b"\n" + draw(lines) + b"\n"
        if op == b"i":
            body = b"(" + draw(st.sampled_from([b"", b"K\x01", b"N"])) + body
    elif op in (b"g", b"p"):  # memo index: the memo holds 0 and 1
        body = b"K\x07p0\n0K\x08p1\n0" + op + first + b"\n"
    elif op == b"a":  # INT as a list item (the line as a protocol 0 list)
        body = b"(lp0\nI" + first + b"\na"
    else:
        body = op + first + b"\n"
    return draw(st.sampled_from([b"", b"\x80\x02"])) + body + draw(st.sampled_from([b".", b"", b"0N."]))


@SETTINGS
@given(data=text_opcode_pickles())
def test_text_opcode_arguments(twins, data):
    found = Differences()
    compare_decoders(twins, data, found, f"pickle {data!r:.300}")
    record_ = pickle.dumps(("m", "C"), 2) + data
    compare_decoders(twins, record_, found, f"record {b64(record_)}", DECODERS[:3])
    assert not found, found.report()


# LONG1/LONG4 payloads: the Cython decoder reads up to 8 bytes in C and longer ones as the Python twin does;
# every length around 8, 16 and 17 bytes, and past the minimal one (a hand-made pickle), gives the same value.
# The same values as @bi texts: the Cython encoder reads those whose magnitude fits 64 bits in C.
LONG_EDGES = [0, 1, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64 - 1, 2**64, -(2**64) + 1, -(2**64), 10**19 - 1,
              10**19, -(10**19), 10**19 + 7, 10**38, -(10**38), 2**127 - 1, 2**127, -(2**127), -(2**127) - 1, 2**128 - 1,
              -(2**128) + 1, 2**128, -(2**128), -(2**128) - 1, 2**136 - 1, -(2**136)]


def _long_payloads():
    for value in LONG_EDGES:
        minimal = len(pickle.encode_long(value))
        for size in range(max(minimal, 1), min(minimal + 3, 21)):
            yield value, value.to_bytes(size, "little", signed=True)
        if 1 < minimal < 9:
            yield value, value.to_bytes(9, "little", signed=True)
            yield value, value.to_bytes(17, "little", signed=True)


def test_long_int_payloads(twins):
    found = Differences()
    python = twins[0]
    for value, payload in _long_payloads():
        for opcode in (b"\x8a" + bytes([len(payload)]), b"\x8b" + struct.pack("<i", len(payload))):
            data = b"\x80\x02" + opcode + payload + b"."
            expected = value if -(2**63) <= value < 2**63 else {"@bi": str(value)}
            assert python.pickle_to_dict(data) == expected, (value, payload)
            compare_decoders(twins, data, found, f"pickle {data!r}")
            record_ = pickle.dumps(("m", "C"), 2) + b"\x80\x02]q\x00" + opcode + payload + b"a."
            compare_decoders(twins, record_, found, f"record {b64(record_)}", DECODERS[:3])
    assert not found, found.report()


def test_bi_marker_texts(twins):
    """@bi texts of those values, spelled as _common.decimal_to_int reads them (sign, leading zeros) and not."""
    found = Differences()
    spellings = ["0", "-0", "+0", "000", "+7", "-007", "", "-", "+", "1a", " 1", "1 ", "١٢", "1_0", "0x10", 12, None]
    for value in LONG_EDGES:
        text = str(value)
        spellings += [text, text.replace("-", "-00") if value < 0 else "00" + text, "+" + text.lstrip("-")]
    spellings += ["9" * 38, "9" * 39, "-" + "9" * 39, "1" + "0" * 38, "3" * 40, "0" * 60 + "5", "9" * 50]
    for text in spellings:
        for tree in ({"@bi": text}, [{"@bi": text}], {"k": {"@bi": text}}):
            record_ = {"@cls": ["m", "C"], "@s": tree}
            encode_both(twins, "encode_zodb_record", record_, found, f"@bi {text!r}")
            if isinstance(text, str):
                encode_both(twins, "json_to_pickle", json.dumps(tree), found, f"@bi text {text!r}")
    assert not found, found.report()


def test_uuid_texts_near_the_canonical_spelling(twins):
    """@uuid texts of 36 characters (the spelling read in C, a segment at a time) with a wrong character or dash
    anywhere, and other spellings: both twins give the same bytes or error."""
    found = Differences()
    canonical = "0123abcd-EF45-6789-aBcD-ef0123456789"
    spellings = [canonical, canonical.lower(), canonical.upper(), "f" * 8 + "-ffff" * 3 + "-" + "f" * 12,
                 "0" * 8 + "-0000" * 3 + "-" + "0" * 12, canonical.replace("-", ""), canonical + " ", "0x" + canonical[2:]]
    for i in range(36):
        spellings += [canonical[:i] + wrong + canonical[i + 1:] for wrong in ("g", "-", "0", "\u0660")]
    for text in spellings:
        for tree in ({"@uuid": text}, [{"@uuid": text}]):
            encode_both(twins, "encode_zodb_record", {"@cls": ["m", "C"], "@s": tree}, found, f"@uuid {text!r}")
            encode_both(twins, "json_to_pickle", json.dumps(tree), found, f"@uuid text {text!r}")
    assert not found, found.report()


@SETTINGS
@given(numbers=st.lists(st.one_of(floats, ints, st.integers(-(2**64), 2**64)), min_size=10, max_size=60),
       words=st.lists(any_texts, max_size=20), protocol=st.sampled_from([0, 2, 3, 5]))
def test_many_numbers_and_texts(twins, numbers, words, protocol):
    # Number and text formatting (JSON text, @f/@bi markers, escapes), densely.
    value = {"n": numbers, "w": words, "k": dict(zip(words, numbers))}
    found = Differences()
    compare_record(twins, pickle.dumps(("m", "C"), 3) + _dumps(value, protocol), found, f"value {value!r:.1500}")
    assert not found, found.report()


json_numbers = st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,4})?", fullmatch=True)


@SETTINGS
@given(numbers=st.lists(json_numbers, min_size=1, max_size=30), spaced=st.booleans())
def test_json_number_spellings(twins, numbers, spaced):
    text = (", " if spaced else ",").join(numbers)
    found = Differences()
    for t in ("[" + text + "]", '{"a": [' + text + '], "@f": ' + numbers[0] + "}", numbers[0]):
        found.note(f"json_to_pickle({t!r})", *call_both(twins, "json_to_pickle", t))
    assert not found, found.report()


def _subclassed(value: Any) -> List[Any]:
    """value as instances of subclasses of its type (those with overridden methods too), where there are any."""
    t = type(value)
    if t is str:
        return [SubStr(value), OddStr(value)]
    if t is int:
        return [SubInt(value), OddInt(value)]
    if t is float:
        return [SubFloat(value), OddFloat(value)]
    if t is list:
        return [SubList(value), OddList(value)]
    if t is dict:
        return [SubDict(value), OddDict(value), collections.OrderedDict(value), collections.defaultdict(list, value)]
    if t is bytes:
        return [SubBytes(value)]
    if t is tuple:
        return [SubTuple(value)] + ([Point(*value)] if len(value) == 2 else [])
    return []


ODD_VALUES = [Colour.RED, {"a": Colour.RED}, Point(1, 2), memoryview(b"ab"), bytearray(b"ab"), {1: 2}, {(1, 2): 3},
              {None: 1}, {1.5: 2}, {math.nan: 1}, {b"k": 1}, {True: 1}, {1: 2, 2.5: 3}, {frozenset([1]): 2},
              {datetime.date(2020, 1, 1): 1}, complex(1, 2), object(), range(3), ..., type, len,
              datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc), decimal.Decimal("1.5"), uuid.UUID(int=5),
              {"@cls": SubStr("m.C")}, {SubStr("@t"): [1]}, {OddStr("@t"): [1]}, {"@t": SubList([1])},
              {"@b": SubStr("YQ==")}, {"@f": OddStr("nan")}, {"@bi": SubStr("12")}]


def _stable_id(value):
    # No memory addresses in test ids: parallel workers (pytest-xdist) must collect the same names.
    return f'{type(value).__name__}:{re.sub(r" at 0x[0-9a-f]+", "", repr(value))[:30]}'


@pytest.mark.parametrize("value", ODD_VALUES + [s for v in ("@t", 5, 1e16, [1, "a"], {"@t": [1]}, {"x": 1},
                                                            b"ab", (1, 2)) for s in _subclassed(v)],
                         ids=_stable_id)
def test_subclasses_and_odd_types(twins, value):
    found = Differences()
    for arg in ({"@cls": ["m", "C"], "@s": value}, {"v": value}, value):
        for fn in ("encode_zodb_record", "dict_to_pickle"):
            found.note(f"{fn}({arg!r:.100})", *call_both(twins, fn, arg))
    assert not found, found.report()


@SETTINGS
@given(tree=python_trees, data=st.data())
def test_subclassed_marker_trees(twins, tree, data):
    # One node of a tree replaced by an instance of a subclass of its type.
    tree = copy.deepcopy(tree)  # changed in place below; hypothesis may hand the same objects out again
    subclassable = [p for p in _nodes(tree) if _subclassed(_at(tree, p))]
    assume(subclassable)
    path = data.draw(st.sampled_from(subclassable))
    tree = _damage(tree, path, "replace", data.draw(st.sampled_from(_subclassed(_at(tree, path)))))
    found = Differences()
    compare_encoders(twins, tree, ["m", "C"], found)
    assert not found, found.report()


def _at(tree: Any, path: Tuple) -> Any:
    for step in path:
        tree = tree[step]
    return tree


def test_cyclic_values(twins):
    found = Differences()
    loop: list = [1]
    loop.append(loop)
    ring: dict = {"a": 1}
    ring["self"] = ring
    marker: dict = {"@t": []}
    marker["@t"].append(marker)
    for value in (loop, ring, marker, [loop, loop]):
        for fn, arg in (("encode_zodb_record", {"@cls": ["m", "C"], "@s": value}), ("dict_to_pickle", {"v": value})):
            found.note(f"{fn} of a cycle", *call_both(twins, fn, arg))
    assert not found, found.report()


class Meddler(str):
    """A str subclass whose own code changes something: the encoders turn it into a str with str(), which
    runs __str__ in the middle of their walk over the dict or list that holds it."""

    def __new__(cls, text: str, change: Callable[[], Any]) -> "Meddler":
        self = super().__new__(cls, text)
        self.change = change
        return self

    def __str__(self) -> str:
        self.change()
        return str.__str__(self)


def _changed_while_encoded() -> Dict[str, Callable[[], Any]]:
    """States whose own code changes the dict or list being encoded, made afresh for each call."""

    def size_changed():
        d = {"a": 1}
        d["b"] = Meddler("x", lambda: d.pop("a"))
        d["c"] = 2
        return d

    def keys_changed():  # the same size, and a key after the one being written: "keys changed"
        d: dict = {}
        d["a"] = Meddler("x", lambda: (d.update(z=[1, "y"]), d.pop("a")))
        return d

    def key_replaced():  # the same size, a deleted entry skipped and a new one walked
        d: dict = {}
        d["a"] = Meddler("x", lambda: (d.pop("b"), d.update(c=3)))
        d["b"] = 2
        return d

    def table_rebuilt():  # the same size, in a new table whose entries sit elsewhere (the walk reads it anew)
        d: dict = {}

        def churn() -> None:
            d.update((f"tmp{i}", i) for i in range(100))
            for i in range(100):
                del d[f"tmp{i}"]
            del d["b"]
            d["e"] = 5

        d["a"] = Meddler("x", churn)
        d.update(b=2, c="three", d=4.0)
        return d

    def cleared():
        d: dict = {}
        d["a"] = Meddler("x", d.clear)
        d["b"] = [1, 2]
        return d

    def key_deletes_itself():  # its value is freed unless the walk holds it
        d: dict = {}
        key = Meddler("k", lambda: d.pop(key))
        d[key] = ["a value", {"only": "here"}]
        return d

    def list_emptied():
        items: list = [1]
        items += [Meddler("x", items.clear), 2, {"after": 3}]
        return items

    def list_grown():
        items: list = []
        items.append(Meddler("x", lambda: items.extend(["more", 4, {"k": "v"}])))
        return items

    def nested_emptied():  # the inner list emptied by a value of the outer dict's other entry
        inner = ["a", "b", 3]
        return {"first": Meddler("x", inner.clear), "second": inner}

    return {f.__name__: f for f in (size_changed, keys_changed, key_replaced, table_rebuilt, cleared,
                                    key_deletes_itself, list_emptied, list_grown, nested_emptied)}


@pytest.mark.parametrize("make", list(_changed_while_encoded().values()), ids=list(_changed_while_encoded()))
def test_containers_changed_while_encoded(twins, make):
    # The Cython walk reads dicts and lists without taking a reference to most items (docs/design.md, "The
    # encoder's dict walk"); where an item's code runs it must hold what it reads, and see the changes as the
    # Python twin's iterators do: the same output, or the same RuntimeError.
    found = Differences()
    for fn, wrap in (("encode_zodb_record", lambda v: {"@cls": ["m", "C"], "@s": v}),
                     ("dict_to_pickle", lambda v: {"v": v})):
        outcomes = [observe(getattr(twin, fn), wrap(make())) for twin in twins]
        found.note(f"{fn} of {make.__name__}", *outcomes)
    assert not found, found.report()


def _record_emptied_by_its_state(cls: List[str], shape: str) -> dict:
    """A record whose dict holds the only reference to its state, a value of which clears the record."""
    record: dict = {"@cls": list(cls)}
    filler = [f"text {i}" * 3 for i in range(50)]
    meddler = Meddler("x", record.clear)
    record["@s"] = ({"a": meddler, "b": filler, "c": {"d": filler}} if shape == "dict"
                    else [meddler, filler, {"d": filler}] if shape == "list"
                    else {"@kv": [[meddler, 1], ["z", filler]]})
    return record


def test_a_state_whose_code_empties_its_record(twins):
    # The state is encoded after its record was emptied by its own value: each encoder must hold the state
    # itself, and give what the Python twin gives (not read freed memory).
    found = Differences()
    for cls in (["m", "C"], ["BTrees.OOBTree", "OOBTree"], ["m\xe9", "C"]):
        for shape in ("dict", "list", "kv"):
            outcomes = [observe(twin.encode_zodb_record, _record_emptied_by_its_state(cls, shape)) for twin in twins]
            found.note(f"{cls} {shape}", *outcomes)
    assert not found, found.report()


WRAP = {"list": lambda v: [v], "dict": lambda v: {"k": v}, "tuple": lambda v: (v,), "@t": lambda v: {"@t": [v]},
        "instance": lambda v: {"@cls": ["m", "C"], "@s": v},
        "@reduce": lambda v: {"@reduce": {"callable": {"@cls": ["m", "f"]}, "args": {"@t": [v]}}}}


def _nested_value(shape: str, depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = WRAP[shape](value)
    return value


@pytest.mark.parametrize("shape", list(WRAP))
def test_depth_limits_alike(twins, shape):
    # Around MAX_DEPTH (1000): the same levels pass, the same first level fails, with the same message.
    found = Differences()
    for depth in range(994, 1004):
        value = _nested_value(shape, depth)
        for fn, arg in (("encode_zodb_record", {"@cls": ["m", "C"], "@s": value}), ("dict_to_pickle", {"v": value})):
            found.note(f"{fn} {shape} x{depth}", *call_both(twins, fn, arg))
        if shape != "tuple":
            text = json_text({"v": value})
            found.note(f"json_to_pickle {shape} x{depth}", *call_both(twins, "json_to_pickle", text))
        if shape in ("list", "dict", "tuple"):  # the decoders: pickles of as many levels
            pickled = b"\x80\x03}X\x01\x00\x00\x00v" + nested_pickle(shape, depth) + b"s."  # {"v": value}
            compare_decoders(twins, pickled, found, f"{shape} x{depth}", encode=False)
            rec = pickle.dumps(("m", "C"), 3) + pickled
            compare_decoders(twins, rec, found, f"record {shape} x{depth}", DECODERS[:3], encode=False)
    assert not found, found.report()


# Each opcode the Cython decoder hands to the Python twin (_decode_cython._PythonTwin), in a state pickle
# whose first part it reads itself, and valid and broken after it.
_HANDED_OVER = {
    "POP": b"K\x01K\x020", "POP_MARK": b"(K\x01K\x021K\x03", "DUP": b"]q\x002",
    "ADDITEMS": b"\x8f(K\x01K\x02\x90", "NEWOBJ_EX": b"cbuiltins\nobject\n)}\x92",
    "INST": b"(K\x01ibuiltins\ncomplex\n", "OBJ": b"(cbuiltins\ncomplex\nK\x01o",
    "EXT1": b"\x82\x01", "EXT2": b"\x83\x01\x00", "EXT4": b"\x84\x01\x00\x00\x00",
    "NEXT_BUFFER": b"\x97", "READONLY_BUFFER": b"\x97\x98",
    "far PUT": b"K\x01p1099511627776\n", "far GET": b"K\x01p1099511627776\n0g1099511627776\n",
}


@pytest.mark.parametrize("name", list(_HANDED_OVER))
def test_rare_opcodes_handed_to_the_python_twin(twins, name):
    body = _HANDED_OVER[name]
    found = Differences()
    for state in (b"\x80\x04}q\x00(X\x01\x00\x00\x00a" + body + b"u.", b"\x80\x04" + body + b".",
                  b"\x80\x04" + body + b"K", b"\x80\x04" + body + b"\x00"):
        compare_record(twins, b"\x80\x03cm\nC\nq\x00." + state, found, f"{name} {state!r}")
    assert not found, found.report()


# What the Cython encoder hands to the Python twin (_encode_cython._PythonTwin), in a record, a value and the
# load path's JSON text: each where the compiled walk meets it, at the top and one level down.
_ENCODER_HANDS_OVER = {
    "str subclass": OddStr("text"), "set": {1, 2}, "frozenset": frozenset((3,)), "bytearray": bytearray(b"ab"),
    "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5), "uuid": uuid.UUID(int=5), "bool subclass": Colour.RED,
    "lone surrogate": "a\ud800b", "@su": {"@su": "a\\ud800"}, "@inst": {"@inst": {"@obj": {"@cls": ["m", "C"]},
                                                                                   "@state": {"a": 1}}},
    "@inst of a call": {"@inst": {"@callable": {"@cls": ["m", "C"]}, "@args": [1], "@state": None}},
    "bad @inst": {"@inst": {"@obj": 1}}, "unencodable": Point,
}


@pytest.mark.parametrize("name", list(_ENCODER_HANDS_OVER))
def test_values_the_encoder_hands_to_the_python_twin(twins, name):
    value = _ENCODER_HANDS_OVER[name]
    found = Differences()
    for state in (value, {"k": value}, [1, value]):
        encode_both(twins, "encode_zodb_record", {"@cls": ["m", "C"], "@s": state}, found, f"{name} record")
        encode_both(twins, "dict_to_pickle", state, found, f"{name} value")
    if name in ("lone surrogate", "@su", "@inst", "@inst of a call", "bad @inst"):  # JSON can hold these
        text = json.dumps({"k": value})
        encode_both(twins, "json_to_pickle", text, found, f"{name} JSON")
        found.note(f"{name} row", *(observe(t.encode_zodb_record_from_pg_json, "m", "C", text) for t in twins))
    assert not found, found.report()


def test_base64_both_ways_around_the_block_steps(twins):
    """Bytes of 0-70 bytes to @b (zjc_b64_pairs: two characters per lookup) and back (zjc_b64_decode: 4
    characters a step, then the padded group), and every text of 16-64 characters with one character made
    non-canonical or outside the alphabet at every place: both twins alike, as a pickle and in a record."""
    found = Differences()
    for n in range(71):
        raw = bytes((7 * i + n) % 256 for i in range(n))
        compare_decoders(twins, pickle.dumps({"b": raw}, 3), found, f"{n} bytes", PICKLE_DECODERS)
    for n in (16, 20, 24, 32, 36, 44, 48, 64):
        text = base64.b64encode(bytes(range(40, 40 + n * 3 // 4))).decode()
        for at in range(len(text)):
            for odd in ("!", "=", "-", "\xe9"):
                bad = text[:at] + odd + text[at + 1:]
                encode_both(twins, "dict_to_pickle", {"v": {"@b": bad}}, found, f"{bad!r}")
                encode_both(twins, "json_to_pickle", json.dumps({"v": {"@b": bad}}), found, f"{bad!r} JSON")
    assert not found, found.report()


@pytest.mark.parametrize("size", [4096, 65536])
def test_records_around_the_writer_buffer_sizes(twins, size):
    """Records whose pickle ends around the encoder's 4 KB stack array and its first 64 KB heap block
    (_grow), written by one str or by many small items."""
    found = Differences()
    for delta in range(-24, 25, 3):
        n = size + delta
        for state in ({"t": "x" * n}, {"l": ["ab"] * (n // 4)}, {"k%d" % i: i for i in range(n // 8)}):
            encode_both(twins, "encode_zodb_record", {"@cls": ["m", "C"], "@s": state}, found, f"{n}")
    assert not found, found.report()
