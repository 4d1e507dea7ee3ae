"""The Cython twin's direct lane for decode_zodb_record_for_pg_json: state pickles of plain values
written as JSON text straight from the pickle bytes (_pickletext_cython).

The lane answers only for what it is sure of and leaves everything else to
the decoder.  So two things are checked: what it takes, it writes exactly as
the Python twin does (and it does take the plain states: a lane that declined
everything would pass every other test); and what it must leave alone (a
marker-like key, a repeated key, text with U+0000 or a lone surrogate, floats
that need a marker, a shared container, a BTree, deep nesting...) it declines,
while the whole function still gives the Python twin's outcome.
"""

from __future__ import annotations

import math
import pickle
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import record
from strictcompare import outcome
from twinloader import load_twin

INT64 = (-(2 ** 63), 2 ** 63 - 1)
ZODB_CLASS = b"\x80\x03cmyapp.content\nDocument\nq\x00."  # ZODB's class pickle: GLOBAL
MAX_LANE_DEPTH = 100  # _pickletext_cython's


@pytest.fixture(scope="module")
def twins():
    python, cython = load_twin("python"), load_twin("cython")
    return python, cython, cython.decode_module._direct_lane_record


def zodb_record(state: Any, protocol: int = 3) -> bytes:
    return ZODB_CLASS + pickle.dumps(state, protocol)


def lane_and_python(twins, data: bytes):
    python, cython, lane = twins
    expected = outcome(python.decode_zodb_record_for_pg_json, data)
    assert outcome(cython.decode_zodb_record_for_pg_json, data) == expected
    return lane(data), expected


# ---------------------------------------------------------------------------
# What the lane takes
# ---------------------------------------------------------------------------

plain_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
plain_keys = plain_texts.filter(lambda k: not k.startswith("@"))
plain_floats = st.one_of(
    st.just(0.0),
    st.floats(1e-4, 1e16, exclude_max=True),
    st.floats(-1e16, -1e-4, exclude_min=True),
    st.sampled_from([0.1, 1e-4, 9999999999999998.0, 123456.789, 2.5, 1 / 3]),
)
plain_leaves = st.one_of(st.none(), st.booleans(), st.integers(*INT64), plain_floats, plain_texts,
                         st.binary(max_size=20), st.sampled_from(["\u2014", "\U0001f600", "a\"b\\c\n\x01"]))
plain_values = st.recursive(
    plain_leaves,
    lambda children: st.one_of(st.lists(children, max_size=5), st.lists(children, max_size=4).map(tuple),
                               st.dictionaries(plain_keys, children, max_size=5)),
    max_leaves=24)


@settings(max_examples=300, deadline=None)
@given(state=plain_values)
def test_the_lane_takes_plain_states_and_writes_the_python_twins_text(twins, state):
    """Protocol 3, as ZODB writes (protocol 2 pickles bytes as a call)."""
    for data in (zodb_record(state), record(state, 3, klass=("myapp.content", "Document"))):
        lane, expected = lane_and_python(twins, data)
        assert lane is not None, f"declined a plain state: {data!r}"
        assert ("ok", lane) == expected


@pytest.mark.parametrize("state", [
    {}, [], (), None, True, 0, -1, 255, 256, 65535, 65536, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, *INT64, 0.0,
    1e-4, 1e16 - 2, "", "x" * 5000, "é" * 5000, b"", b"\x00", b"\xff\xfe", b"abc", b"abcd", b"x" * 300,
    {"a": {"b": {"c": [1, (2, 3), {"d": None}]}}}, {"k%d" % i: i for i in range(1000)},
    ["shared text"] * 3,  # one string, memoized once and fetched twice
])
def test_the_lane_takes_each_plain_value(twins, state):
    lane, expected = lane_and_python(twins, zodb_record(state))
    assert lane is not None
    assert ("ok", lane) == expected


def test_many_setitems_batches_and_long_binput(twins):
    """Over 1000 items a pickler writes several SETITEMS/APPENDS batches; over 256 memo entries LONG_BINPUT."""
    state = {"k%d" % i: ["v%d" % i] for i in range(2500)}
    lane, expected = lane_and_python(twins, zodb_record(state))
    assert lane is not None and ("ok", lane) == expected


# ---------------------------------------------------------------------------
# What the lane leaves to the decoder
# ---------------------------------------------------------------------------

SHARED = [1, 2]


@pytest.mark.parametrize("state", [
    {"@t": [1]}, {"@id": 1}, {"a": 1, "@ns:YQ==": 2},          # keys the marker rules look at
    {1: "a"}, {(1, 2): "a"}, {b"k": 1},                         # keys that are not text
    "a\x00b", {"k": "\x00"}, {"a\x00": 1}, "\ud800", {"k": "x\udfff"},  # @ns, @su
    float("nan"), float("inf"), -float("inf"), -0.0, 1e16, 1e-5, 5e-324, [1e300],  # @f, exponents
    2 ** 63, -(2 ** 63) - 1, 2 ** 200,                          # @bi
    [SHARED, SHARED],                                           # a container fetched from the memo
    {1, 2}, frozenset(), bytearray(b"x"), 1j,                  # calls
])
def test_the_lane_declines_what_the_rules_decide(twins, state):
    lane, expected = lane_and_python(twins, zodb_record(state))
    assert lane is None


def test_the_lane_declines_deep_states(twins):
    state: Any = "leaf"
    for _ in range(MAX_LANE_DEPTH + 1):
        state = [state]
    lane, expected = lane_and_python(twins, zodb_record(state))
    assert lane is None and expected[0] == "ok"
    lane, _ = lane_and_python(twins, zodb_record(state[0][0]))
    assert lane is not None


def _pickled(*ops: bytes) -> bytes:
    return b"\x80\x03" + b"".join(ops) + b"."


def _text(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


@pytest.mark.parametrize("state_pickle", [
    _pickled(b"}(", _text("a"), b"K\x01", _text("a"), b"K\x02u"),          # a repeated key: the last value wins
    _pickled(b"}(", _text("a"), b"K\x01", _text("b"), b"K\x02", _text("a"), b"K\x03u"),
    _pickled(b"}(" + b"".join(_text("k%d" % i) + b"K\x01" for i in range(20)) + _text("k7") + b"K\x02u"),
    _pickled(b"}", _text("a"), b"K\x01s", _text("a"), b"K\x02s"),          # SETITEM twice
    _pickled(b"]q\x05h\x05"),                                              # a list fetched from the memo
    _pickled(b"h\x00"),                                                    # the class pickle's entry
    _pickled(b"\x8a\x09" + b"\x00" * 8 + b"\x01"),                         # LONG1 of 9 bytes
    _pickled(b"\x8a\x08" + b"\xff" * 8),                                   # -1 in 8 bytes: taken (below)
    _pickled(b"K\x01K\x02"),                                               # two values left at STOP
    _pickled(b"(K\x01"),                                                   # a mark left at STOP
    _pickled(b"K\x01u"),                                                   # SETITEMS without a mark
    _pickled(b"](K\x01u"),                                                 # SETITEMS on a list
    _pickled(b"}(K\x01e"),                                                 # APPENDS on a dict
    _pickled(b"}(", _text("a"), b"u"),                                     # a key without a value
    _pickled(b"(K\x01\x86"),                                               # TUPLE2 across a mark
    _pickled(b"X\x05\x00\x00\x00ab"),                                      # text past the end
    _pickled(b"X\x02\x00\x00\x00\xc3("),                                   # invalid UTF-8
    _pickled(b"\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x01"),                # FRAME
    _pickled(b"K\x01\x94"),                                                # MEMOIZE
    b"\x80\x06K\x01.",                                                     # protocol 6
    b"\x80\x03K\x01",                                                      # no STOP
    b"",
])
def test_hand_made_state_pickles(twins, state_pickle):
    """Pickles no pickler writes (or writes rarely): the lane declines, or agrees with the Python twin."""
    data = ZODB_CLASS + state_pickle
    lane, expected = lane_and_python(twins, data)
    if lane is not None:
        assert ("ok", lane) == expected
        assert state_pickle == _pickled(b"\x8a\x08" + b"\xff" * 8)
        assert lane[2] == "-1"


def test_btree_classes_are_left_to_the_decoder(twins):
    """Their states are flattened (@kv, @ks...)."""
    data = b"\x80\x03cBTrees.OOBTree\nOOBucket\nq\x00." + pickle.dumps((("a", 1),), 3)
    lane, expected = lane_and_python(twins, data)
    assert lane is None and expected[0] == "ok"
    data = b"\x80\x03cBTrees.Length\nLength\nq\x00." + pickle.dumps(7, 3)
    lane, expected = lane_and_python(twins, data)
    assert ("ok", lane) == expected and lane[2] == "7"


def test_other_class_pickles_are_left_to_the_decoder(twins):
    """Only the two usual class forms take the lane: (module, name) as GLOBAL or as two texts."""
    for klass in [(("myapp", "Doc"), None), (("myapp", "Doc"), (1,))]:
        lane, expected = lane_and_python(twins, record({"a": 1}, 3, klass=klass))
        assert lane is None and expected[0] == "ok"


def test_a_declined_class_still_gives_the_same_text(twins):
    """After the lane declines a record, the next records of that class go the usual way for a while
    (plain_state_text's memory); either way the text is the Python twin's."""
    python, cython, lane = twins
    declined = zodb_record({"when": float("nan")})
    plain = [zodb_record({"n": i, "text": "t%d" % i}) for i in range(40)]
    for data in [declined] + plain + [declined] * 3 + plain:
        assert outcome(cython.decode_zodb_record_for_pg_json, data) == \
            outcome(python.decode_zodb_record_for_pg_json, data)
    assert all(lane(data) is not None for data in plain)


def test_the_lane_answers_for_records_of_the_corpora(twins):
    """Some records of the public corpus are plain values (the rest hold references, dates...)."""
    from corpus import records

    taken = 0
    for _, data in records("public"):
        lane, expected = lane_and_python(twins, data)
        if lane is not None:
            taken += 1
            assert ("ok", lane) == expected
    assert taken >= 100


def test_floats_at_the_edges_of_the_lane(twins):
    """Positional floats only: at 1e-4 and just below 1e16 repr has no exponent, beyond it does."""
    for x in [1e-4, math.nextafter(1e-4, 1), math.nextafter(1e-4, 0), math.nextafter(1e16, 0), 1e15, 0.5]:
        lane, expected = lane_and_python(twins, zodb_record({"x": x}))
        if lane is not None:
            assert ("ok", lane) == expected
            assert "e" not in lane[2]
        else:
            assert "e" in repr(x)


def test_lane_results_are_fresh(twins):
    """Each call returns its own refs list (a caller may append to it)."""
    _, cython, _ = twins
    data = zodb_record({"a": 1})
    first, second = cython.decode_zodb_record_for_pg_json(data), cython.decode_zodb_record_for_pg_json(data)
    assert first == second and first[3] is not second[3]


def test_the_lane_reads_from_a_bytes_object_only(twins):
    """bytearray and memoryview arguments are copied to bytes by the decoder (same outcome)."""
    _, cython, lane = twins
    data = zodb_record({"a": 1})
    for arg in (bytearray(data), memoryview(data)):
        assert cython.decode_zodb_record_for_pg_json(arg) == cython.decode_zodb_record_for_pg_json(data)
    with pytest.raises(TypeError):
        lane(bytearray(data))
