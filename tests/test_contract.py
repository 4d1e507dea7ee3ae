"""The Rust codec's worked example, and each place where we write what it lost or refused, for each twin.

The sections follow docs/format.md, "Differences from the Rust codec".
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import io
import json
import pickle
import uuid

import pytest
import pytz
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import MAX_EXAMPLES, PATHS, Ref, record, records_back, same_records
from zodb_json_codec._db import fidelity as _fidelity

APPENDIX_A = (
    b"\x80\x03cpersistent.mapping\nPersistentMapping\nq\x00.\x80\x03}q\x01X\x04\x00\x00\x00dataq\x02}q\x03"
    b"(X\x05\x00\x00\x00titleq\x04X\x05\x00\x00\x00Helloq\x05X\x01\x00\x00\x00nq\x06G?\xf0\x00\x00\x00\x00"
    b"\x00\x00X\x04\x00\x00\x00whenq\x07cdatetime\ndatetime\nq\x08C\n\x07\xe9\x01\x02\x03\x04\x05\x00\x00"
    b"\x00q\tcdatetime\ntimezone\nq\ncdatetime\ntimedelta\nq\x0bK\x00K\x00K\x00\x87q\x0cRq\r\x85q\x0eRq\x0f"
    b"\x86q\x10Rq\x11X\x04\x00\x00\x00tagsq\x12X\x01\x00\x00\x00aq\x13X\x01\x00\x00\x00bq\x14\x86q\x15X\x03"
    b"\x00\x00\x00rawq\x16C\x02\x00\xffq\x17X\x05\x00\x00\x00priceq\x18cdecimal\nDecimal\nq\x19X\x04\x00\x00"
    b"\x009.90q\x1a\x85q\x1bRq\x1cus."
)
APPENDIX_A_STATE = {"data": {"title": "Hello", "n": 1.0, "when": {"@dt": "2025-01-02T03:04:05+00:00"},
                             "tags": {"@t": ["a", "b"]}, "raw": {"@b": "AP8="}, "price": {"@dec": "9.90"}}}


def roundtrips(impl, data: bytes) -> None:
    """Every path (the dict, the dict variant through json.dumps, the JSON text) gives the same objects back."""
    for path in PATHS:
        (again,) = records_back(impl, [data], path)
        assert same_records(data, again), path


# ---------------------------------------------------------------------------
# Reference examples
# ---------------------------------------------------------------------------

def test_appendix_a(impl):
    assert impl.decode_zodb_record(APPENDIX_A) == {
        "@cls": ["persistent.mapping", "PersistentMapping"], "@s": APPENDIX_A_STATE}
    assert impl.decode_zodb_record_for_pg(APPENDIX_A) == (
        "persistent.mapping", "PersistentMapping", APPENDIX_A_STATE, [])
    assert impl.decode_zodb_record_for_pg_json(APPENDIX_A) == (
        "persistent.mapping", "PersistentMapping",
        '{"data":{"title":"Hello","n":1.0,"when":{"@dt":"2025-01-02T03:04:05+00:00"},"tags":{"@t":["a","b"]},'
        '"raw":{"@b":"AP8="},"price":{"@dec":"9.90"}}}', [])
    roundtrips(impl, APPENDIX_A)


def test_pickle_to_json_is_pretty_and_sorted(impl):
    state = APPENDIX_A[APPENDIX_A.index(b"q\x00.") + 3:]
    assert impl.pickle_to_json(state) == json.dumps(APPENDIX_A_STATE, indent=2, sort_keys=True,
                                                    ensure_ascii=False)


@pytest.mark.parametrize("pickled, expected", [
    (b"\x80\x02cfoo\nBar\n.", {"@cls": ["foo", "Bar"]}),
    (b"\x80\x02cfoo\nBar\n)\x81}b.", {"@cls": ["foo", "Bar"], "@s": {}}),
    (b"\x80\x02cfoo\nBar\nK\x01\x85\x81}b.",
     {"@cls": ["foo", "Bar"], "@s": {"@args": {"@t": [1]}, "@state": {}}}),
    (b"\x80\x02K\x01}b.", {"@inst": {"@obj": 1, "@state": {}}}),
    (b"\x80\x02]q\x00(K\x01K\x02eh\x00\x86.", {"@t": [[1, 2], [1, 2]]}),
    (b"\x80\x02N.garbage", None),
    (b"\x80\x02K\x01K\x02t.", {"@t": [1, 2]}),
])
def test_reference_examples(impl, pickled, expected):
    if pickled == b"\x80\x02K\x01K\x02t.":
        # CPython needs a MARK for TUPLE; so do we (the reference takes the whole stack).
        with pytest.raises(ValueError, match="offset"):
            impl.pickle_to_dict(pickled)
        return
    assert impl.pickle_to_dict(pickled) == expected


@pytest.mark.parametrize("value, text", [
    (1e16, "10000000000000000.0"), (1e15, "1000000000000000.0"), (1e-5, "0.00001"), (1e-7, "1e-7"),
    (2.5e-10, "2.5e-10"), (5e-324, "5e-324"), (12345.678, "12345.678"), (0.0, "0.0"),
    (1.2345678901234568e17, "123456789012345680.0"),
])
def test_pg_float_spelling(impl, value, text):
    _, _, state_json, _ = impl.decode_zodb_record_for_pg_json(record({"x": value}))
    assert state_json == '{"x":%s}' % text


def test_pickle_to_json_float_spelling(impl):
    text = impl.pickle_to_json(pickle.dumps([1e16, 1e-5, 1e-7, 1e100], 3))
    assert json.loads(text) == [1e16, 1e-5, 1e-7, 1e100]
    assert "1e+16" in text and "0.00001" in text and "1e-7" in text and "1e+100" in text


def test_string_escapes(impl):
    s = 'q"b\\n\n\r\t\x08\x0c\x01\x7f\u2028/é'
    _, _, pg, _ = impl.decode_zodb_record_for_pg_json(record({"s": s}))
    assert pg == '{"s":"q\\"b\\\\n\\n\\r\\t\\u0008\\u000c\\u0001\x7f\u2028/é"}'
    pretty = impl.pickle_to_json(pickle.dumps(s, 3))
    assert pretty == '"q\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\x7f\u2028/é"'


def test_btree_shapes(impl):
    from BTrees.OOBTree import OOBTree, OOBucket, OOSet, OOTreeSet

    tree = OOBTree({"a": 1, "b": 2})
    data = record(tree.__getstate__(), klass=OOBTree)
    assert impl.decode_zodb_record(data)["@s"] == {"@kv": [["a", 1], ["b", 2]]}
    assert impl.decode_zodb_record(record(OOTreeSet(["a", "b"]).__getstate__(), klass=OOTreeSet))["@s"] == {
        "@ks": ["a", "b"]}
    assert impl.decode_zodb_record(record(OOBucket().__getstate__(), klass=OOBucket))["@s"] == {"@kv": []}
    assert impl.decode_zodb_record(record(OOBTree().__getstate__(), klass=OOBTree))["@s"] is None
    assert impl.decode_zodb_record(record(OOSet([1, 2]).__getstate__(), klass=OOSet))["@s"] == {"@ks": [1, 2]}
    roundtrips(impl, data)


# ---------------------------------------------------------------------------
# Class metadata (docs/format.md, "Class metadata")
# ---------------------------------------------------------------------------

class Plain:
    pass


@pytest.mark.parametrize("klass, args", [
    (Plain, None),                                  # bare GLOBAL (format 1)
    ((Plain, ("a", 1)), {"@t": ["a", 1]}),          # format 2: (klass, newargs)
    ((Plain, None), None),                          # (GLOBAL, None)
    ((("app.mod", "Kls"), None), None),             # format 3
    ((("app.mod", "Kls"), ("x",)), {"@t": ["x"]}),  # format 7
])
def test_class_metadata_forms(impl, klass, args):
    data = record({"a": 1}, klass=klass)
    out = impl.decode_zodb_record(data)
    assert out["@cls"] in (["app.mod", "Kls"], [__name__, "Plain"])
    assert out["@cls"] != ["", ""]
    if args is None:
        assert out["@s"] == {"a": 1}
    else:
        assert out["@s"] == {"@args": args, "@state": {"a": 1}}
    roundtrips(impl, data)


def test_python2_byte_string_class_names(impl):
    data = b"\x80\x02U\x07app.modU\x03Kls\x86q\x01.\x80\x02}q\x02."
    assert impl.decode_zodb_record(data) == {"@cls": ["app.mod", "Kls"], "@s": {}}


def test_other_first_pickles_are_kept_as_an_object_record(impl):
    # Was a ValueError; now the first pickle's value is kept (docs/format.md, "Class metadata").
    data = record({"a": 1}, klass=(1, 2, 3))
    assert impl.decode_zodb_record(data) == {
        "@cls": ["", ""], "@s": {"@obj": {"@t": [1, 2, 3]}, "@state": {"a": 1}}}
    roundtrips(impl, data)


# ---------------------------------------------------------------------------
# Instances: REDUCE + BUILD, NEWOBJ without BUILD, dict and list subclass contents
# ---------------------------------------------------------------------------

class WithReduceAndState:
    def __init__(self, a):
        self.a = a

    def __reduce__(self):
        return (WithReduceAndState, (self.a,), {"extra": 1})


class Empty:
    pass


def test_reduce_then_build_stays_a_reduce(impl):
    data = record({"x": WithReduceAndState(5)})
    value = impl.decode_zodb_record(data)["@s"]["x"]
    assert value == {"@reduce": {"callable": {"@cls": [__name__, "WithReduceAndState"]},
                                 "args": {"@t": [5]}, "state": {"extra": 1}}}
    roundtrips(impl, data)


def test_newobj_without_build(impl):
    data = record({"x": Empty()})
    value = impl.decode_zodb_record(data)["@s"]["x"]
    assert value == {"@reduce": {"callable": {"@cls": [__name__, "Empty"]}, "args": {"@t": []}, "newobj": True}}
    roundtrips(impl, data)


def test_dict_and_list_subclass_contents_in_every_path(impl):
    data = record({"od": collections.OrderedDict([("a", 1), ("b", 2)]),
                   "dd": collections.deque([1, 2])})
    state = impl.decode_zodb_record(data)["@s"]
    assert state["od"]["@reduce"]["items"] == [["a", 1], ["b", 2]]
    assert state["dd"]["@reduce"]["appends"] == [1, 2]
    pg = json.loads(impl.decode_zodb_record_for_pg_json(data)[2])
    assert pg["od"] == state["od"]
    again = impl.decode_zodb_record(impl.encode_zodb_record(impl.decode_zodb_record(data)))
    assert again["@s"] == state


# ---------------------------------------------------------------------------
# References (docs/format.md, "Persistent references")
# ---------------------------------------------------------------------------

OID = b"\x00\x00\x00\x00\x00\x00\x00\x07"


@pytest.mark.parametrize("pid, compact", [
    ((OID, Plain), ["0000000000000007", f"{__name__}.Plain"]),
    ((OID, None), "0000000000000007"),
    (OID, {"@b": "AAAAAAAAAAc="}),
    (["w", (OID,)], ["w", {"@t": [{"@b": "AAAAAAAAAAc="}]}]),
    (["m", ("other", OID, Plain)], ["m", {"@t": ["other", {"@b": "AAAAAAAAAAc="}, {"@cls": [__name__, "Plain"]}]}]),
    (["n", ("other", OID)], ["n", {"@t": ["other", {"@b": "AAAAAAAAAAc="}]}]),
])
def test_reference_forms_round_trip(impl, pid, compact):
    data = record({"r": Ref(pid)})
    module, name, state, refs = impl.decode_zodb_record_for_pg(data)
    assert state == {"r": {"@ref": compact}}
    if isinstance(pid, bytes) or (isinstance(pid, tuple) and isinstance(pid[0], bytes)):
        assert refs == [7]
    roundtrips(impl, data)


def test_persid_text_and_ambiguous_ids(impl):
    data = b"\x80\x02capp\nK\n.\x80\x02}(X\x01\x00\x00\x00rP123\nu."
    assert impl.decode_zodb_record(data)["@s"] == {"r": {"@ref": "123"}}
    roundtrips(impl, data)
    # A text id that reads as a hex oid cannot be told apart: the record is carried verbatim.
    data = b"\x80\x02capp\nK\n.\x80\x02}(X\x01\x00\x00\x00rPabcd\nu."
    assert "@pkl" in impl.decode_zodb_record(data)["@s"]
    roundtrips(impl, data)


# ---------------------------------------------------------------------------
# Text in PostgreSQL: @ns, @su, @f (docs/format.md, "Markers", "JSON text")
# ---------------------------------------------------------------------------

def test_nul_surrogates_and_special_floats_for_pg(impl):
    state = {"s": "a\x00b", "k\x00": 1, "sur": "x\ud800", "\udc80": 2, "nan": float("nan"),
             "inf": float("inf"), "ninf": float("-inf"), "nzero": -0.0, "big": 1e300}
    data = record(state)
    _, _, pg_state, _ = impl.decode_zodb_record_for_pg(data)
    assert pg_state["s"] == {"@ns": "YQBi"}
    assert pg_state["@ns:awA="] == 1
    assert pg_state["sur"] == {"@su": "eO2ggA=="}
    assert pg_state["@su:7bKA"] == 2
    assert pg_state["nan"] == {"@f": "nan"} and pg_state["inf"] == {"@f": "inf"}
    assert pg_state["ninf"] == {"@f": "-inf"} and pg_state["nzero"] == {"@f": "-0.0"}
    _, _, text, _ = impl.decode_zodb_record_for_pg_json(data)
    assert "\\u0000" not in text and "10000000000" in text
    text.encode("utf-8")  # no lone surrogates left
    decoded = impl.decode_zodb_record(data)["@s"]
    assert decoded["s"] == "a\x00b" and decoded["sur"] == "x\ud800"  # the dict path keeps native values
    roundtrips(impl, data)


def test_nul_in_a_class_name_is_a_value_error_for_pg(impl):
    data = b"\x80\x02X\x04\x00\x00\x00a\x00bcX\x01\x00\x00\x00K\x86N\x86.\x80\x02}."
    assert impl.decode_zodb_record(data)["@cls"] == ["a\x00bc", "K"]
    with pytest.raises(ValueError):
        impl.decode_zodb_record_for_pg_json(data)
    with pytest.raises(ValueError):
        impl.decode_zodb_record_for_pg(data)


# ---------------------------------------------------------------------------
# User data that looks like a marker (docs/format.md, "Markers and user data")
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("user", [
    {"@t": [1, 2]}, {"@cls": ["a", "b"]}, {"@ref": "0000000000000001"}, {"@dt": "2020-01-01T00:00:00"},
    {"@cls": ["a", "b"], "@s": 1}, {"@args": 1, "@state": 2}, {"@kv": [[1, 2]]},
    {"@cls": ["a", "b"], "@s": 1, "@newobj": False}, {"@cls": ["a", "b"], "@items": [], "@appends": []},
    {"@cls": ["a", "b"], "@s": 1, "@newobj": False, "@items": [], "@appends": []},
    {"@reduce": {"callable": 1}}, {"@newobj": {"args": 1}},
])
def test_marker_lookalikes_come_back_as_dicts(impl, user):
    data = record({"u": user})
    out = impl.decode_zodb_record(data)["@s"]["u"]
    assert "@d" in out
    roundtrips(impl, data)


@pytest.mark.parametrize("user", [{"@id": "x", "@type": "y"}, {"@cls": "user data"}, {"@kv": "looks like"}])
def test_other_at_keys_stay_plain(impl, user):
    data = record({"u": user})
    assert impl.decode_zodb_record(data)["@s"]["u"] == user
    roundtrips(impl, data)


# ---------------------------------------------------------------------------
# Encoder input: one rule set, native values as themselves
# ---------------------------------------------------------------------------

NATIVE = {
    "tuple": (1, "a"), "bytes": b"\x00\xff", "bytearray": bytearray(b"ab"), "set": {1, 2},
    "frozenset": frozenset({"a"}), "dt": dt.datetime(2025, 1, 2, 3, 4, 5, 6),
    "dt_utc": dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc),
    "dt_offset": dt.datetime(2025, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=-5, seconds=7))),
    "dt_pytz": pytz.timezone("Europe/Berlin").localize(dt.datetime(2025, 7, 1, 9)),
    "date": dt.date(2025, 6, 15), "time": dt.time(12, 30, 1, 5), "td": dt.timedelta(days=-1, seconds=5),
    "dec": decimal.Decimal("-0.00"), "uuid": uuid.UUID(int=12345), "big": 2 ** 200, "neg": -(3 ** 100),
}


def test_native_values_are_encoded_faithfully(impl):
    data = impl.dict_to_pickle(NATIVE)
    assert data[:2] == b"\x80\x03"
    assert pickle.loads(data) == NATIVE


def test_unknown_native_values_are_type_errors(impl):
    with pytest.raises(TypeError, match="Plain"):
        impl.dict_to_pickle({"x": Plain()})
    with pytest.raises(TypeError, match="object"):
        impl.encode_zodb_record({"@cls": ["a", "b"], "@s": {"x": object()}})


def test_time_with_named_zone_round_trips(impl):
    data = record({"t": dt.time(8, 0, tzinfo=dt.timezone(dt.timedelta(hours=1, seconds=1, microseconds=5)))})
    assert impl.decode_zodb_record(data)["@s"]["t"] == {"@time": "08:00:00+01:00:01.000005"}
    roundtrips(impl, data)
    value = {"@time": "08:00:00", "@tz": {"pytz": ["Europe/Berlin", 3600, 0, "CET"], "name": "Europe/Berlin"}}
    assert pickle.loads(impl.dict_to_pickle({"t": value}))["t"].tzinfo.zone == "Europe/Berlin"


def test_json_to_pickle_keeps_order_and_numbers(impl):
    data = impl.json_to_pickle('{"b": 1, "a": -958304908.2601749, "c": 123456789012345678901234567890}')
    value = pickle.loads(data)
    assert list(value) == ["b", "a", "c"]
    assert value["a"] == -958304908.2601749 and value["c"] == 123456789012345678901234567890


# ---------------------------------------------------------------------------
# Protocols 0 to 5
# ---------------------------------------------------------------------------

def test_protocol_0_escapes_inst_and_pop_mark(impl):
    data = (b"(capp\nK\np1\nNtp2\n.(dp3\nS'esc'\np4\nS'it\\'s \\x00'\np5\nsS'u'\nVcaf\\u00e9\np6\n"
            b"sS'o'\n(iapp\nOld\np7\n(dp8\nbs(I1\n1S'p'\n(lp9\nI01\naI00\nas.")
    state = impl.decode_zodb_record(data)["@s"]
    pairs = dict((json.dumps(k), v) for k, v in state["@d"])
    assert pairs['{"@b": "ZXNj"}'] == {"@b": "aXQncyAA"}  # it's \x00, escapes decoded
    assert pairs['{"@b": "dQ=="}'] == "café"
    roundtrips(impl, data)


# Escapes CPython reads with a DeprecationWarning (kept as written) or refuses.
STRING_ESCAPES = [
    (b"S'\\q'\n.", b"\\q"),            # unknown escape: the backslash stays
    (b"S'\\777\\0'\n.", b"\xff\x00"),   # octal above 0o377: its low eight bits
    (b"S'a\\tb\\x41\\\"'\n.", b'a\tbA"'),   # simple and hex escapes
]


@pytest.mark.parametrize("data, raw", STRING_ESCAPES)
def test_string_escapes_as_cpython_reads_them_without_warnings(impl, data, raw):
    import base64
    import warnings

    with warnings.catch_warnings():  # CPython's own unpickler warns here
        warnings.simplefilter("ignore")
        assert pickle.loads(data, encoding="bytes") == raw
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # python -W error: a warning would be an exception
        assert impl.pickle_to_dict(data) == {"@b": base64.b64encode(raw).decode()}


@given(st.binary(max_size=12) | st.lists(st.sampled_from([b"\\", b"x", b"7", b"f", b"\n", b"q", b"'"]),
                                         max_size=12).map(b"".join))
@settings(max_examples=20 * MAX_EXAMPLES, deadline=None)
def test_string_escapes_decode_as_codecs_escape_decode(text):
    import codecs
    import warnings

    from zodb_json_codec._decode_common import CodecError, decode_string_escapes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = ("ok", codecs.escape_decode(text)[0])
        except ValueError as exc:
            expected = ("error", str(exc))
    try:
        assert ("ok", decode_string_escapes(text)) == expected
    except CodecError as exc:
        assert ("error", str(exc)) == expected


@pytest.mark.parametrize("data", [b"S'\\'\n.", b"S'\\x4'\n.", b"S'\\xg0'\n."])
def test_bad_string_escapes_are_value_errors(impl, data):
    with pytest.raises(ValueError, match=r"STRING escape: .* at offset 0"):
        impl.pickle_to_dict(data)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_protocol(impl, protocol):
    state = {"a": [1, 2.5, "x", b"y", (1,), {3}, frozenset(), bytearray(b"z"), None, True]}
    data = record(state, protocol=protocol)
    roundtrips(impl, data)


def test_bytearray8_is_the_protocol_4_form(impl):
    p5 = impl.pickle_to_dict(pickle.dumps(bytearray(b"ab"), 5))
    p4 = impl.pickle_to_dict(pickle.dumps(bytearray(b"ab"), 4))
    assert p5 == p4 == {"@reduce": {"callable": {"@cls": ["builtins", "bytearray"]},
                                    "args": {"@t": [{"@b": "YWI="}]}}}


def test_fold_is_kept(impl):
    folded = dt.datetime(2025, 11, 2, 1, 30, fold=1)
    data = record({"d": folded}, protocol=4)
    roundtrips(impl, data)
    assert "134" not in json.dumps(impl.decode_zodb_record(data))


def test_shared_objects_are_shared_and_cycles_are_verbatim(impl):
    shared = [1, 2]
    data = record({"a": shared, "b": shared})
    assert impl.decode_zodb_record(data)["@s"] == {"a": [1, 2], "b": [1, 2]}
    loop = []
    loop.append(loop)
    data = record({"self": loop})
    out = impl.decode_zodb_record(data)
    assert list(out["@s"]) == ["@pkl"]
    assert impl.encode_zodb_record(out) == data
    _, _, text, _ = impl.decode_zodb_record_for_pg_json(data)
    assert impl.encode_zodb_record({"@cls": out["@cls"], "@s": json.loads(text)}) == data


# A Namespace built with {"a": 1} and memoized at 1, then given a second state {"b": 2}: pickle changes that
# one object, so every other reference to it (a GET, a DUP, before or after) sees b too.  An @inst around
# it (what BUILD on a built object gives) changes only its own copy: JSON cannot carry those (found by
# fuzz_decode), while an object rebuilt where nothing else refers to it keeps the Rust codec's @inst.
_BUILT = b"\x80\x03cargparse\nNamespace\n)\x81}X\x01\x00\x00\x00aK\x01sb"
_REBUILD = b"}X\x01\x00\x00\x00bK\x02sb"
_REBUILT_SHARED = {
    "fetched before": _BUILT + b"q\x01h\x01" + _REBUILD + b"\x86.",
    "fetched after": _BUILT + b"q\x01" + _REBUILD + b"h\x01\x86.",
    "duplicated": _BUILT + b"2" + _REBUILD + b"\x86.",
    "rebuilt twice": _BUILT + _REBUILD + b"q\x01h\x01" + b"}X\x01\x00\x00\x00cK\x03sb\x86.",
}
_REBUILT_ALONE = {
    "never fetched": _BUILT + b"q\x01" + _REBUILD + b".",
    "memoized after": _BUILT + _REBUILD + b"q\x01h\x01\x86.",
}


@pytest.mark.parametrize("case", sorted(_REBUILT_SHARED) + sorted(_REBUILT_ALONE))
def test_an_object_rebuilt_where_it_is_shared_is_verbatim(impl, case):
    shared = case in _REBUILT_SHARED
    state = (_REBUILT_SHARED if shared else _REBUILT_ALONE)[case]
    data = b"\x80\x03cargparse\nNamespace\nq\x00." + state
    out = impl.decode_zodb_record(data)
    single = impl.pickle_to_dict(state)
    if shared:
        assert list(out["@s"]) == ["@pkl"] and list(single) == ["@pkl"]
    else:
        assert "@inst" in json.dumps(out)
    assert _record_state(impl.encode_zodb_record(out)) == pickle.loads(state)
    assert pickle.loads(impl.dict_to_pickle(single)) == pickle.loads(state)
    _, _, text, _ = impl.decode_zodb_record_for_pg_json(data)
    kept = impl.encode_zodb_record({"@cls": out["@cls"], "@s": json.loads(text)})
    assert _record_state(kept) == pickle.loads(state)


def _record_state(data: bytes):
    """The state a record's second pickle loads to, read with the first pickle's memo as ZODB does."""
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.load()
    return unpickler.load()


# ---------------------------------------------------------------------------
# Limits (docs/format.md, "Nesting depth") and the bytes the encoders write (protocol 3)
# ---------------------------------------------------------------------------

def test_sparse_memo(impl):
    body = b"N" + b"".join(b"r" + i.to_bytes(4, "little") for i in range(0, 150000))
    data = b"\x80\x03capp\nK\n." + b"\x80\x03" + body + b"r\xff\xff\xff\x7f."
    assert impl.decode_zodb_record(data)["@s"] is None


def test_encoders_write_protocol_3(impl):
    rec = impl.encode_zodb_record({"@cls": ["a", "b"], "@s": {"x": 1}})
    assert rec.startswith(b"\x80\x03") and rec.count(b"\x80\x03") == 2
    assert impl.dict_to_pickle({"x": 1}).startswith(b"\x80\x03")
    assert impl.json_to_pickle('{"x": 1}').startswith(b"\x80\x03")
    klass, state = _fidelity.load_record(rec)
    assert klass == ("a.b", None) and state == {"x": 1}


def test_reference_forms_are_accepted(impl):
    """Forms only the reference wrote (its lossy ones included) still encode."""
    old = {"@cls": ["app", "K"], "@s": {
        "inst": {"@inst": {"@callable": {"@cls": ["app", "P"]}, "@args": {"@t": [1]}, "@state": {"s": 1}}},
        "reconstructed": {"@cls": ["copy_reg", "_reconstructor"],
                          "@s": {"@args": {"@t": [{"@cls": ["app", "P"]}, {"@cls": ["__builtin__", "object"]},
                                                  None]}, "@state": {"a": 3}}},
        "newobj_ex": {"@reduce": {"callable": {"@cls": ["app", "P"]},
                                  "args": {"@args": {"@t": []}, "@kwargs": {"k": 1}}}},
        "tz": {"@dt": "2025-06-15T12:30:45", "@tz": {"zoneinfo": "Europe/Vienna"}},
        "pkl": {"@pkl": "AAE="},
    }}
    data = impl.encode_zodb_record(old)
    state = _fidelity.load_record(data)[1]
    # copyreg._reconstructor is a function: written as REDUCE it loads (as NEWOBJ it would not).
    assert type(state["reconstructed"]).__qualname__ == "app.P" and state["reconstructed"]._state == {"a": 3}
    assert state["inst"]._called and state["inst"]._args == (1,) and state["inst"]._state == {"s": 1}
    assert state["pkl"] == b"\x00\x01"
