"""The Cython twin's direct lane for decode_zodb_record_for_pg_json: state pickles of plain values,
references, BTree states, the usual known types and plain objects written as JSON text straight from
the pickle bytes (_pickletext_cython).

The lane answers only for what it is sure of and leaves everything else to
the decoder.  So two things are checked: what it takes, it writes exactly as
the Python twin does (and it does take the plain states: a lane that declined
everything would pass every other test); and what it must leave alone (a
marker-like key, a repeated key, text with U+0000 or a lone surrogate, floats
that need a marker, a shared container, a BTree, deep nesting...) it declines,
while the whole function still gives the Python twin's outcome.
"""

from __future__ import annotations

import datetime
import decimal
import io
import itertools
import math
import pickle
import struct
import uuid
import zoneinfo
from typing import Any

import pytest
import pytz
from hypothesis import given, settings
from hypothesis import strategies as st

from cpython_pickle import Pickler
from helpers import MAX_EXAMPLES, Ref, record, ref_pid
from zodbapp import AttrDict, Keyed, Plain
from strictcompare import outcome
from twinloader import load_twin
from zodb_json_codec._common import C_WALK_DEPTH

INT64 = (-(2 ** 63), 2 ** 63 - 1)
ZODB_CLASS = b"\x80\x03cmyapp.content\nDocument\nq\x00."  # ZODB's class pickle: GLOBAL
MAX_LANE_DEPTH = C_WALK_DEPTH  # _pickletext_cython's


@pytest.fixture(scope="module")
def twins():
    python, cython = load_twin("python"), load_twin("cython")
    return python, cython, cython.decode_module._direct_lane_record


def zodb_record(state: Any, protocol: int = 3) -> bytes:
    """ZODB_CLASS and the state pickle, a Ref written as its persistent id."""
    out = io.BytesIO()
    Pickler(out, protocol, persistent_id=ref_pid).dump(state)
    return ZODB_CLASS + out.getvalue()


def lane_and_python(twins, data: bytes):
    python, cython, lane = twins
    expected = outcome(python.decode_zodb_record_for_pg_json, data)
    assert outcome(cython.decode_zodb_record_for_pg_json, data) == expected
    return lane(data), expected


# ---------------------------------------------------------------------------
# What the lane takes
# ---------------------------------------------------------------------------

plain_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # U+0000 too: @ns
plain_keys = plain_texts.filter(lambda k: not k.startswith("@") and "\x00" not in k)
plain_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x or math.copysign(1, x) > 0),  # not @f
    st.sampled_from([0.1, 1e-4, 9999999999999998.0, 123456.789, 2.5, 1 / 3, 1e16, 1e-5, 1e300]),
)
plain_leaves = st.one_of(st.none(), st.booleans(), st.integers(*INT64), plain_floats, plain_texts,
                         st.binary(max_size=20), st.sampled_from(["\u2014", "\U0001f600", "a\"b\\c\n\x01"]))
plain_values = st.recursive(
    plain_leaves,
    lambda children: st.one_of(st.lists(children, max_size=5), st.lists(children, max_size=4).map(tuple),
                               st.dictionaries(plain_keys, children, max_size=5)),
    max_leaves=24)

# The known types and objects the lane writes itself, and references.
OIDS = st.binary(min_size=8, max_size=8)
fixed_offsets = st.builds(  # strictly within a day either way
    lambda s, us: datetime.timezone(datetime.timedelta(seconds=s, microseconds=us)),
    st.integers(-86399, 86398), st.sampled_from([0, 1, 999999]))
pytz_datetimes = st.builds(lambda dt, zone: pytz.timezone(zone).localize(dt),
                           st.datetimes(min_value=datetime.datetime(1900, 1, 1),
                                        max_value=datetime.datetime(2100, 1, 1)),
                           st.sampled_from(["Europe/Vienna", "US/Eastern", "Asia/Kolkata"]))
# The timedeltas the decoder recognises in C, each part within 9 * 10**8 either way (more days: declined,
# as test_the_lane_declines_what_the_rules_decide checks).
LANE_TIMEDELTA = datetime.timedelta(days=900000000)
lane_timedeltas = st.timedeltas(-LANE_TIMEDELTA, LANE_TIMEDELTA)
known_leaves = st.one_of(
    st.datetimes(), st.datetimes(timezones=fixed_offsets), pytz_datetimes, st.dates(), lane_timedeltas,
    st.decimals(), st.sampled_from([decimal.Decimal("NaN"), decimal.Decimal("-Infinity"), decimal.Decimal("1E+7")]),
    st.uuids(), st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=2 ** 63 - 1), uuid.UUID(int=2 ** 63),
                                 uuid.UUID(int=2 ** 128 - 1), uuid.UUID(int=2 ** 127)]),
    st.frozensets(plain_texts, max_size=3), st.sets(st.integers(*INT64), max_size=3),
    st.builds(Ref, st.builds(lambda oid: (oid, None), OIDS)),
    st.builds(Ref, st.builds(lambda oid, k: (oid, k), OIDS, st.sampled_from([Plain, AttrDict, Keyed]))),
)
rich_values = st.recursive(
    st.one_of(plain_leaves, known_leaves),
    lambda children: st.one_of(st.lists(children, max_size=4), st.lists(children, max_size=3).map(tuple),
                               st.dictionaries(plain_keys, children, max_size=4),
                               st.builds(lambda d: Plain(**d),
                                         st.dictionaries(st.sampled_from("abc"), children, min_size=1))),
    max_leaves=16)


@settings(max_examples=2 * MAX_EXAMPLES, deadline=None)
@given(state=plain_values)
def test_the_lane_takes_plain_states_and_writes_the_python_twins_text(twins, state):
    """Protocol 3, as ZODB writes (protocol 2 pickles bytes as a call)."""
    for data in (zodb_record(state), record(state, 3, klass=("myapp.content", "Document"))):
        lane, expected = lane_and_python(twins, data)
        assert lane is not None, f"declined a plain state: {data!r}"
        assert ("ok", lane) == expected


@settings(max_examples=2 * MAX_EXAMPLES, deadline=None)
@given(state=rich_values)
def test_the_lane_takes_references_known_types_and_objects(twins, state):
    """References (oid, class) and (oid, None), datetimes naive, with a fixed offset or a pytz zone (not
    pytz's UTC), dates, timedeltas, Decimals, sets, frozensets, UUIDs and objects made by NEWOBJ without
    arguments then BUILD."""
    data = zodb_record(state)
    lane, expected = lane_and_python(twins, data)
    assert lane is not None, f"declined: {data!r}"
    assert ("ok", lane) == expected


@pytest.mark.parametrize("state", [
    {}, [], (), None, True, 0, -1, 255, 256, 65535, 65536, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, *INT64, 0.0,
    1e-4, 1e16 - 2, "", "x" * 5000, "é" * 5000, b"", b"\x00", b"\xff\xfe", b"abc", b"abcd", b"x" * 300,
    {"a": {"b": {"c": [1, (2, 3), {"d": None}]}}}, {"k%d" % i: i for i in range(1000)},
    ["shared text"] * 3,  # one string, memoized once and fetched twice
    "a\x00b", {"k": "\x00"}, ["\x00" * 5000],  # text with U+0000: @ns
    [1e16, 1e-5, 5e-324, 1e300, -1.5e-300, 1e22, 1.25e17],  # the float spellings' edges
    [uuid.UUID(int=7)] * 2, [(1, "a")] * 2, [Plain(a=1)] * 2, [datetime.date(2020, 1, 2)] * 2,  # fetched again
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
    {"a\x00": 1}, "\ud800", {"k": "x\udfff"}, {"k": "\x00\ud800"},  # a key with U+0000, @su
    2 ** 63, -(2 ** 63) - 1, 2 ** 200,                          # @bi
    float("nan"), float("inf"), -float("inf"), -0.0,            # @f (rare: the decoder's)
    [SHARED, SHARED],                                           # a container fetched from the memo
    bytearray(b"x"), 1j, datetime.time(1, 2), Plain,            # calls the decoder writes, a class
    datetime.datetime(2020, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Vienna")),  # a zoneinfo zone: @tz
    Ref(b"\x00" * 7), Ref((b"\x00" * 7, None)), Ref((b"\x00" * 8, "Plain")),  # other persistent ids
    AttrDict(a=1),                                              # a dict subclass's items
    Keyed(1),                                                   # NEWOBJ with arguments: {"@args": ...}
    datetime.datetime(2020, 1, 1, tzinfo=pytz.utc),             # pytz's UTC (rare: the decoder's)
    uuid.UUID(int=5).__reduce_ex__(2)[0],                       # a class as a value
    datetime.timedelta.max, datetime.timedelta.min,             # days past 9 * 10**8: the decoder's to check
    LANE_TIMEDELTA + datetime.timedelta(days=1), -LANE_TIMEDELTA - datetime.timedelta(microseconds=1),
])
def test_the_lane_declines_what_the_rules_decide(twins, state):
    lane, expected = lane_and_python(twins, zodb_record(state))
    assert lane is None


def _lane_key_slot(key: str, mask: int) -> int:
    """The slot of the lane's table of keys (FNV-1a of the UTF-8, its high bits folded in) a key takes."""
    h = 0xCBF29CE484222325
    for byte in key.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return (h ^ (h >> 29)) & mask


def test_keys_made_to_collide_are_left_to_the_decoder(twins):
    """512 keys that all take one slot of the lane's unkeyed table (1024 slots) would cost it about 130,000
    comparisons, a quadratic time an attacker could make longer: it gives up after 4 probes a slot and
    declines, and the decoder (CPython's dicts hash with a secret key) writes the same text."""
    keys = list(itertools.islice((key for key in (f"k{i}" for i in itertools.count())
                                  if _lane_key_slot(key, 1023) == 0), 512))
    assert len(keys) == 512
    lane, expected = lane_and_python(twins, zodb_record({key: 1 for key in keys}))
    assert lane is None
    assert expected[0] == "ok"
    spread = [f"k{i}" for i in range(512)]  # keys as they come: taken
    lane, expected = lane_and_python(twins, zodb_record({key: 1 for key in spread}))
    assert lane is not None


def _self_holding() -> Plain:
    obj = Plain()
    obj.me = obj
    return obj


def test_an_object_holding_itself_is_left_to_the_decoder(twins):
    """Its state GETs it before BUILD: a cycle, which the decoder writes as @pkl."""
    lane, expected = lane_and_python(twins, zodb_record(_self_holding()))
    assert lane is None and "@pkl" in expected[1][2]


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


BUCKET = (("a", 1, "b", 2),)
SET = (("a", "b"),)


@pytest.mark.parametrize("klass, state, taken", [
    ("BTrees.OOBTree\nOOBucket", BUCKET, True),
    ("BTrees.OOBTree\nOOBucket", (BUCKET[0], Ref((b"\x00" * 7 + b"\x09", None))), True),  # @next
    ("BTrees.OOBTree\nOOSet", SET, True),
    ("BTrees.OOBTree\nOOTreeSet", ((SET,),), True),
    ("BTrees.OOBTree\nOOBTree", ((BUCKET,),), True),                          # one bucket, inline
    ("BTrees.OOBTree\nOOBTree", ((Ref((b"\x00" * 8, None)), "m", Ref((b"\x01" * 8, None))),
                                 Ref((b"\x00" * 8, None))), True),            # @children, @first
    ("BTrees.OOBTree\nOOBTree", None, True),
    ("BTrees.OOBTree\nOOBucket", (("a", 1, "b"),), False),                   # odd: the generic form
    ("BTrees.OOBTree\nOOBTree", (("a", "b"), None), False),                  # children without a reference
    ("BTrees.OOBTree\nOOBTree", {"not": "a tree"}, False),
    ("BTrees.Length\nLength", 7, True),                                      # not a BTree
])
def test_btree_states(twins, klass, state, taken):
    """Flattened as docs/format.md's "BTrees" says (@kv, @ks, @next, @children, @first); other shapes
    are the decoder's."""
    data = b"\x80\x03c" + klass.encode() + b"\nq\x00." + zodb_record(state)[len(ZODB_CLASS):]
    lane, expected = lane_and_python(twins, data)
    assert (lane is not None) == taken
    if taken:
        assert ("ok", lane) == expected


def test_references_to_the_records_own_class(twins):
    """ZODB pickles both pickles with one memo: a reference to an object of the record's own class GETs
    the class pickle's entry (memo 0), in both usual class forms."""
    state = {"sibling": Ref((b"\x00" * 7 + b"\x05", Plain)), "other": Ref((b"\x00" * 7 + b"\x06", Plain))}
    for klass in (Plain, ("zodbapp", "Plain")):
        data = record(state, 3, klass=klass)
        assert b"h\x00" in data[data.index(b".") + 1:] or klass is not Plain
        lane, expected = lane_and_python(twins, data)
        assert lane is not None and ("ok", lane) == expected
        assert lane[3] == [5, 6]


def test_a_class_named_with_a_dot_is_left_to_the_decoder(twins):
    """Its reference is written in the verbose form ("module.Name" would split at the wrong dot)."""
    state = {"x": Ref((b"\x00" * 8, Plain))}
    data = record(state, 3).replace(b"zodbapp\nPlain\n", b"zodbapp\nPl.in\n")
    lane, expected = lane_and_python(twins, data)
    assert lane is None and expected[0] == "ok"


def test_records_as_encode_zodb_record_writes_them(twins):
    """Their class pickle, ((module, name), None) without memo entries, takes the lane too (a storage copying
    from a jsonb storage stores such records); a state that GETs a class memo entry is the decoder's."""
    python, cython, lane = twins
    state = {"title": "caf\xe9", "n": [1, 2.5, None], "x": {"@ref": ["0000000000000005", "zodbapp.Plain"]}}
    for twin in (python, cython):
        data = twin.encode_zodb_record({"@cls": ["zodbapp", "Plain"], "@s": state})
        klass = data[:data.index(b".") + 1]
        assert klass.endswith(b"\x86N\x86.") and data[len(klass):].startswith(b"\x80\x03")
        taken, expected = lane_and_python(twins, data)
        assert taken is not None and ("ok", taken) == expected
        assert taken[3] == [5]
        taken, expected = lane_and_python(twins, klass + b"\x80\x03h\x00.")
        assert taken is None and expected[0] == "raised" and issubclass(expected[1], ValueError)
        assert "memo" in expected[2]


def test_other_class_pickles_are_left_to_the_decoder(twins):
    """Only the three usual class forms take the lane: (module, name) as GLOBAL or as two texts, and
    ((module, name), None) as encode_zodb_record writes it, without memo entries."""
    for klass in [(("myapp", "Doc"), None), (("myapp", "Doc"), (1,))]:
        lane, expected = lane_and_python(twins, record({"a": 1}, 3, klass=klass))
        assert lane is None and expected[0] == "ok"


def test_a_declined_record_does_not_change_the_route_of_the_next(twins):
    """Whether the lane takes a record depends on that record alone: records of a class whose record it
    just declined are taken, and every text is the Python twin's."""
    python, cython, lane = twins
    declined = zodb_record({"@id": "a JSON-LD key: the marker rules look at it"})
    assert lane(declined) is None
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


@pytest.mark.parametrize("x", [1e-4, math.nextafter(1e-4, 1), math.nextafter(1e-4, 0), 1e-5, 1.5e-5, 9.99e-6,
                               1e-7, 2.5e-10, math.nextafter(1e16, 0), 1e16, math.nextafter(1e16, 2e16), 1e15,
                               0.5, 5e-324, 1.7976931348623157e308, 123456789012345.67, 2.0 ** 60, -1e-300])
def test_floats_at_the_edges_of_each_spelling(twins, x):
    """docs/format.md's "Float spelling": positional, integral with .0, 0.000ddd and d.ddde-N, on either
    side of each boundary; the lane writes them as the Python twin does."""
    for value in (x, -x):
        lane, expected = lane_and_python(twins, zodb_record({"x": value}))
        assert ("ok", lane) == expected


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


def test_a_text_written_longer_is_the_lanes_while_the_repeats_weigh_little(twins):
    # The decoder weighs a text with U+0000 as its {"@ns": base64} form once the memo's repeats weigh more
    # than 1/29 of the budget (docs/format.md, "Expansion budget"); the lane writes it only below that.
    from zodb_json_codec._decode_common import WRITTEN_RATIO, expansion_budget
    python, _, lane = twins
    text = "\x00" + "x" * 999

    def shared(n):  # {"k": [text, text, ...]}: the text once, then n GETs of it, 1001 each
        return zodb_record({"k": [text] * (n + 1)})

    limit = expansion_budget(len(shared(0))) // WRITTEN_RATIO
    taken = limit // 1001 - 1  # each GET adds 3 bytes to the record (a larger budget): well inside
    assert lane(shared(taken)) == python.decode_zodb_record_for_pg_json(shared(taken))
    assert lane(shared(limit // 1001 + 2)) is None
    assert lane(zodb_record({"k": ["a\x00b"]})) is not None
