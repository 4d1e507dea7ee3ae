"""Hypothesis strategies for generated Python values and ZODB records, and the builders they use.

Leaves of every kind docs/format.md names (texts, ints, floats, datetimes with
every kind of zone...), special values of each, marker-like keys, and two
families of values made of them: ``pickled_*`` for test_twins (pickled with
protocols 0-5, texts of 4 KB and more too, no references or application
objects) and ``record_*`` for test_hypothesis (references and application
objects: ZODB records, written by ``make_record`` as ZODB writes them, and
``records`` of them).
"""

from __future__ import annotations

import datetime
import decimal
import io
import math
import pickle
import struct

import pytz
import zodbpickle.pickle
from hypothesis import assume
from hypothesis import strategies as st
from ZODB._compat import PersistentPickler

import cpython_pickle
import zodbapp
from helpers import Ref, ref_pid

# ---------------------------------------------------------------------------
# Leaves
# ---------------------------------------------------------------------------

SPECIAL_CHARS = ["\x00", "\ud800", "\udbff", "\udc80", "\udfff", "\u2028", "\u2029", "\x08", "\x0c",
                 "\x7f", "\x1f", "é", "😀", "中", "\n", "\r", '"', "\\", "/", "@", ":"]
chars = st.one_of(st.characters(), st.sampled_from(SPECIAL_CHARS))
texts = st.one_of(st.text(alphabet=chars, max_size=10),
                  st.lists(st.sampled_from(SPECIAL_CHARS), min_size=1, max_size=4).map("".join))
# Long enough (4 KB and more) for the Cython twin's JSON text path to leave them in the pickle.
long_texts = st.builds(lambda t, n: (t + "abcdefgh") * n, texts, st.integers(512, 514))
# test_twins: texts short and long.
any_texts = st.one_of(texts, long_texts)

SPECIAL_INTS = [0, -1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
                2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, -(2**64), 2**128, 2**2048 + 1, -(2**1000) - 7]
ints = st.one_of(st.integers(), st.integers(min_value=-(2**80), max_value=2**80), st.sampled_from(SPECIAL_INTS))

_PAYLOAD_NAN = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
SPECIAL_FLOATS = [-0.0, 0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-7, 1e-5, 1e-4, 0.1, 1e15, 1e16,
                  -1e16, 1e17, 1.2345678901234568e17, 1e300, 1.7976931348623157e308, math.inf, -math.inf, math.nan,
                  -math.nan, _PAYLOAD_NAN]
floats = st.one_of(st.floats(), st.sampled_from(SPECIAL_FLOATS))

byte_strings = st.one_of(st.binary(max_size=12), st.binary(min_size=250, max_size=300))

FIXED_TZS = [
    datetime.timezone.utc,
    datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
    datetime.timezone(-datetime.timedelta(hours=8)),
    datetime.timezone(datetime.timedelta(hours=1, minutes=2, seconds=3)),
    datetime.timezone(-datetime.timedelta(hours=5, seconds=15)),
    datetime.timezone(datetime.timedelta(microseconds=1500)),
    datetime.timezone(-datetime.timedelta(microseconds=1)),
    datetime.timezone(datetime.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999)),
    datetime.timezone(datetime.timedelta(hours=1), "CET"),
    datetime.timezone(datetime.timedelta(0), "Zulu"),
    pytz.utc,
    pytz.FixedOffset(90),
]
offsets = st.timedeltas(min_value=-datetime.timedelta(hours=23, minutes=59),
                        max_value=datetime.timedelta(hours=23, minutes=59))
fixed_tzs = st.one_of(st.sampled_from(FIXED_TZS), offsets.map(datetime.timezone))
PYTZ_ZONES = ["Europe/Vienna", "US/Eastern", "Asia/Kolkata", "Australia/Lord_Howe", "America/St_Johns",
              "Africa/Abidjan", "UTC"]
# Fixed offsets, zoneinfo zones and pytz zones as they are (a datetime or time given one has its first offset).
tzinfos = st.one_of(st.none(), fixed_tzs, st.timezones(), st.sampled_from(PYTZ_ZONES).map(pytz.timezone))


def _pytz_localized(dt: datetime.datetime, zone: str, localize: bool) -> datetime.datetime:
    tz = pytz.timezone(zone)
    return tz.localize(dt) if localize else dt.replace(tzinfo=tz)  # the latter: the zone's LMT


datetimes = st.one_of(
    st.datetimes(timezones=tzinfos),
    st.builds(_pytz_localized,
              st.datetimes(min_value=datetime.datetime(1900, 1, 1), max_value=datetime.datetime(2100, 1, 1)),
              st.sampled_from(PYTZ_ZONES), st.booleans()),
)
times = st.times(timezones=tzinfos)
SPECIAL_DECIMALS = ["-0", "0E-10", "1E+5", "1.10", "NaN", "-NaN123", "sNaN", "Infinity", "-Infinity",
                    "1E+999999", "-1.000000000000000000000000000000000001"]
decimals = st.one_of(st.decimals(allow_nan=True, allow_infinity=True),
                     st.sampled_from(SPECIAL_DECIMALS).map(decimal.Decimal))

MARKER_KEYS = ["@t", "@b", "@bi", "@d", "@set", "@fset", "@ref", "@pkl", "@dt", "@date", "@time", "@td",
               "@dec", "@uuid", "@cls", "@s", "@reduce", "@newobj", "@inst", "@ns", "@su", "@f", "@items",
               "@appends", "@kv", "@ks", "@next", "@children", "@first", "@args", "@state", "@obj",
               "@callable", "@kwargs", "@tz", "@ns:AAAA", "@ns:AGE=", "@su:7aCA", "@ns:", "@su:", "@id",
               "@type", "@context", "@", "@@t"]


def hashable_leaves_of(texts):
    """Leaves that can be dict keys and set members (NaN equals nothing, not even itself: none)."""
    return st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=False), texts, st.binary(max_size=8),
                     st.uuids(), st.dates(), st.decimals(allow_nan=False, allow_infinity=False))


def hashables_of(hashable_leaves):
    """Those and tuples and frozensets of them."""
    return st.recursive(hashable_leaves, lambda children: st.one_of(st.lists(children, max_size=3).map(tuple),
                                                                    st.frozensets(children, max_size=3)),
                        max_leaves=6)


def leaves_of(texts):
    """Leaves of every kind but references."""
    return st.one_of(st.none(), st.booleans(), ints, floats, texts, byte_strings,
                     st.binary(max_size=8).map(bytearray), datetimes, st.dates(), times, st.timedeltas(), decimals,
                     st.uuids())


def marker_keys_of(texts):
    """Dict keys spelled as the codec's markers are, and others."""
    return st.one_of(st.sampled_from(MARKER_KEYS), texts)


# With short texts: test_hypothesis.
hashable_leaves = hashable_leaves_of(texts)
hashables = hashables_of(hashable_leaves)
# Native Python values given to the encoders (docs/api.md) are these.
native_leaves = leaves_of(texts)
marker_keys = marker_keys_of(texts)
# With texts short and long: test_twins.
pickled_hashable_leaves = hashable_leaves_of(any_texts)
pickled_hashables = hashables_of(pickled_hashable_leaves)
pickled_leaves = leaves_of(any_texts)
pickled_marker_keys = marker_keys_of(any_texts)


# ---------------------------------------------------------------------------
# test_twins: values pickled with protocols 0 to 5, states and class pickles of records
# ---------------------------------------------------------------------------

def _pickled_containers(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(any_texts, children, max_size=4),
        st.dictionaries(pickled_marker_keys, children, max_size=3),
        st.dictionaries(pickled_hashables, children, max_size=3),
        st.sets(pickled_hashables, max_size=3),
        st.frozensets(pickled_hashables, max_size=3),
        st.builds(lambda v: [v, v, {"again": v}], children),  # shared: memo GETs
    )


# test_twins: values any pickler writes (no references or application objects), for the decoders to agree on.
pickled_values = st.recursive(pickled_leaves, _pickled_containers, max_leaves=16)

# Class names: BTrees ones have their own state mapping; the odd ones reach
# the PostgreSQL name checks.
CLASSES = [("persistent.mapping", "PersistentMapping"), ("BTrees.OOBTree", "OOBTree"),
           ("BTrees.OOBTree", "OOBucket"), ("BTrees.IIBTree", "IITreeSet"), ("BTrees.OIBTree", "OISet"),
           ("BTrees.Length", "Length"), ("zodbapp", "Item"), ("m\x00", "C"), ("m", "\ud800"), ("", ""), ("é", "中")]
classes = st.one_of(st.sampled_from(CLASSES), st.tuples(any_texts, any_texts))


def _bucket(items: list) -> tuple:
    return (tuple(items),)


# BTree-family states (bucket items, tree children), so that those mappings are reached with data they accept.
btree_states = st.one_of(
    st.lists(pickled_hashable_leaves, max_size=6).map(_bucket),
    st.builds(lambda items, nxt: (tuple(items), nxt), st.lists(pickled_hashable_leaves, max_size=6), pickled_values),
    st.lists(pickled_hashable_leaves, max_size=6).map(lambda items: ((_bucket(items),),)),
    st.builds(lambda a, k, b, first: ((a, k, b), first), pickled_values, pickled_hashable_leaves, pickled_values,
              pickled_values),
)
# test_twins: record states of those values, BTrees' too.
pickled_states = st.one_of(st.dictionaries(any_texts, pickled_values, max_size=5), pickled_values, btree_states)


@st.composite
def class_pickles(draw) -> bytes:
    """The class pickle in the spellings ZODB has used."""
    module, name = draw(classes)
    form = draw(st.sampled_from(["pair", "pair+None", "pair+args", "global"]))
    if form == "global":  # a class as GLOBAL (format #1): only text without newlines fits
        assume("\n" not in module + name)
        try:
            return b"\x80\x03c" + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\nq\x00."
        except UnicodeEncodeError:
            assume(False)
    meta = {"pair": (module, name), "pair+None": ((module, name), None),
            "pair+args": ((module, name), draw(st.lists(pickled_hashable_leaves, max_size=2).map(tuple)))}[form]
    return pickle.dumps(meta, 3)


# ---------------------------------------------------------------------------
# test_hypothesis: records as ZODB writes them
# ---------------------------------------------------------------------------

def _pickler(f, zodb: bool):
    """ZODB's pickler, or CPython's (writing a ZoneInfo as CPython does, on PyPy too: see cpython_pickle)."""
    if zodb:
        return PersistentPickler(ref_pid, f, 3)
    return cpython_pickle.Pickler(f, 3, persistent_id=ref_pid)


def make_record(meta, state, zodb: bool = True) -> bytes:
    """Both pickles with one pickler (one memo), as ZODB's ObjectWriter does.

    ZODB's own pickler (zodbpickle) cannot pickle a ``ZoneInfo`` at protocol
    3 on CPython (it does not know CPython's ``getattr(ZoneInfo, "_unpickle")``
    spelling); values holding one are pickled by CPython's pickle instead,
    also protocol 3.  On PyPy zodbpickle writes them, with the pure-Python
    zoneinfo's cache flag True; with zodb=False they are written as CPython
    writes them (flag 1) there too.
    """
    return _dump([meta, state], zodb)


def make_pickle(value, zodb: bool = True) -> bytes:
    return _dump([value], zodb)


def _dump(values, zodb: bool) -> bytes:
    """values pickled one after another by one pickler: zodbpickle's, or CPython's where it cannot."""
    for use_zodb in ((True, False) if zodb else (False,)):
        f = io.BytesIO()
        p = _pickler(f, use_zodb)
        try:
            for value in values:
                p.dump(value)
        except (pickle.PicklingError, zodbpickle.pickle.PicklingError):
            if use_zodb:
                continue
            raise
        return f.getvalue()
    raise AssertionError("unreachable")


oids = st.binary(min_size=8, max_size=8)
pids = st.one_of(
    st.builds(lambda o: (o, zodbapp.Item), oids),
    st.builds(lambda o: (o, None), oids),
    oids,  # a class with __getnewargs__: the bare oid
    st.builds(lambda o: ["w", (o,)], oids),
    st.builds(lambda o: ["w", (o, "other")], oids),
    st.builds(lambda o: ["m", ("other", o, zodbapp.Item)], oids),
    st.builds(lambda o: ["n", ("other", o)], oids),
)
refs = pids.map(Ref)
record_leaves = st.one_of(native_leaves, refs)


def _marker_lookalikes(children):
    """User dicts spelled like the codec's markers: they must come back as dicts."""
    return st.one_of(
        st.builds(lambda v: {"@t": [v]}, children),
        st.builds(lambda v: {"@cls": ["zodbapp", "Item"], "@s": v}, children),
        st.builds(lambda v: {"@cls": ["zodbapp", "Item"], "@s": v, "@items": [["k", v]]}, children),
        st.builds(lambda a, b: {"@args": a, "@state": b}, children, children),
        st.builds(lambda v: {"@reduce": {"callable": {"@cls": ["os", "system"]}, "args": {"@t": [v]}}}, children),
        st.builds(lambda v: {"@ref": v}, children),
        st.builds(lambda v: {"@kv": [[1, v]], "@next": None}, children),
        st.sampled_from([
            {"@dt": "2020-01-01T00:00:00", "@tz": {"zoneinfo": "UTC"}},
            {"@time": "12:00:00", "@tz": {"pytz": ["UTC"], "name": "UTC"}},
            {"@ns": "AA=="}, {"@su": "7aCA"}, {"@f": "nan"}, {"@f": "-0.0"}, {"@b": "AAAA"}, {"@bi": "12"},
            {"@ref": "0000000000000001"}, {"@ref": ["0000000000000001", "a.B"]}, {"@pkl": "gAN9cQAu"},
            {"@ks": [1]}, {"@children": [], "@first": None}, {"@d": [[1, 2]]}, {"@set": []}, {"@uuid": "0" * 32},
            {"@date": "2020-01-01"}, {"@td": [1, 2, 3]}, {"@dec": "1.5"}, {"@cls": ["a", "b"]},
            {"@ns:AAAA": 1}, {"@su:7aCA": 2}, {"@ns:AGE=": "x"}, {"@id": "https://example.org/", "@type": "T"},
            {"@inst": {"@obj": 1, "@state": 2}}, {"@newobj": {"callable": None, "args": None}},
        ]),
    )


def _plain(attrs):
    obj = zodbapp.Plain()
    obj.__dict__.update(attrs)
    return obj


def _plain_slots(x, attrs):
    obj = zodbapp.PlainSlots()
    obj.x = x
    obj.__dict__.update(attrs)
    return obj


def _shared(x):
    return [x, x, {"again": x}, (x,)]


def _record_containers(children):
    attrs = st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), children, max_size=3)
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(texts, children, max_size=4),
        st.dictionaries(marker_keys, children, max_size=4),
        st.dictionaries(hashables, children, max_size=4),
        _marker_lookalikes(children),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.builds(_plain, attrs),
        st.builds(_plain_slots, children, attrs),
        st.builds(_shared, st.lists(children, max_size=2)),
        st.builds(_shared, st.dictionaries(texts, children, max_size=2)),
    )


# test_hypothesis: values of ZODB records (references, application objects, marker look-alikes), for round trips.
record_values = st.recursive(record_leaves, _record_containers, max_leaves=20)
record_states = st.one_of(st.dictionaries(texts, record_values, max_size=6), record_values)

ITEM = ("zodbapp", "Item")
KEYED = ("zodbapp", "Keyed")
# (the class pickle's value, [module, name]).
metas = st.one_of(
    st.just((zodbapp.Item, ITEM)),  # a bare class: ZODB's format #1
    st.just(((ITEM, None), ITEM)),  # ((module, name), None): formats #3/#7
    st.builds(lambda a: ((zodbapp.Keyed, (a,)), KEYED), hashable_leaves),  # (class, newargs): format #2
    st.builds(lambda a: ((KEYED, (a, 1)), KEYED), hashable_leaves),  # ((module, name), newargs)
)


@st.composite
def records(draw):
    """(a record as ZODB writes it, [module, name] of its class)."""
    (meta, cls), state = draw(metas), draw(record_states)
    return make_record(meta, state, zodb=draw(st.booleans())), list(cls)
