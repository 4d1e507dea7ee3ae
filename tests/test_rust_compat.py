"""Drop-in for the Rust codec's releases 1.6.1 and 1.7.0 (docs/format.md, "Differences from the Rust codec").

1. What each release wrote reads back: every record of every set (corpus.SETS) that a release decoded,
   its JSON (the dict, and the JSON text after a real jsonb column) encoded by each twin gives the
   record's objects; where the release's JSON itself lost them, the record is listed in LOST_IN_JSON with
   what was lost, and the list is exact.
2. We write what 1.7.0 writes wherever it is right: for every record it keeps intact, its dict, class
   names and JSON text, and refs that contain its refs.
3. 1.7.0's shapes and the shapes written before it, by hand; its refusals of bad JSON, as ValueErrors
   naming the key.

The vectors were made with the releases themselves (scripts/rust_vectors.py), so no test needs the Rust
codec installed.
"""

from __future__ import annotations

import collections
import io
import json
import pickle

import pytest

import rustshapes
from corpus import SETS, VERSIONS, faithful, row_record, vectors
from helpers import APP_CLASS, PATHS, record, records_back, same_records
from pgjsonb import jsonb_texts
from zodb_json_codec._db import fidelity


# What a release's JSON lost, by record: no reader can give these records' objects back from it.  The
# reasons, as docs/format.md's differences give them.
OFFSET_SECONDS = "a time zone offset's seconds dropped (+01:02 for +01:02:03)"
NAN_AS_NULL = "NaN written as null in the JSON text"
JSONB_FLOAT = "-0.0, 1e16 or 1e300 written as JSON numbers that jsonb turns into 0 or an integer"
LOOKALIKE = "a user dict that looks like a marker written plain, read back as the marker"
SELF = "a value that contains itself written as a tree"
OBJECT_RECORD = "an object record reduced to its state"
PROTOCOL_0_1 = "Python 2 era text opcodes read differently from CPython"
REDUCE_AS_NEWOBJ = "an object made by calling its class written as one made by __new__"
CONTENTS = "a dict or list subclass's contents dropped"
NEWOBJ_AS_REDUCE = "an object made by __new__ written as one made by calling its class"
NUL_KEY = "a key that spells an escape ('@ns:AA==') written plain, read back as the escape (U+0000)"

LOST_IN_JSON: dict = {}  # (version, set, path) -> {oid: reason}; filled below


def _lost(version: str, name: str, paths: tuple, reason: str, *oids: str) -> None:
    for path in paths:
        LOST_IN_JSON.setdefault((version, name, path), {}).update(dict.fromkeys(oids, reason))


BOTH = ("dict", "pg_json")
for _version in VERSIONS:
    _lost(_version, "public", BOTH, OFFSET_SECONDS, "0000000000000079")
    _lost(_version, "public", ("pg_json",), NAN_AS_NULL, "00000000000000b9", "00000000000000b1")
    _lost(_version, "public", ("pg_json",), JSONB_FLOAT, "00000000000000d3", "00000000000000b7", "00000000000000b4")
    _lost(_version, "public", BOTH, LOOKALIKE, "00000000000000c2")
    _lost(_version, "public", BOTH, SELF, "00000000000f462e")
    _lost(_version, "shapes", BOTH, LOOKALIKE, "marker_lookalikes_p2", "marker_lookalikes_p3")
    _lost(_version, "shapes", BOTH, SELF, "self_containing_list_p2", "self_containing_list_p3",
          *[f"recursive_tuple_{n}_p{p}" for n in range(1, 4) for p in (2, 3)])
_lost("1.7.0", "shapes", BOTH, SELF, *[f"recursive_tuple_{n}_p{p}" for n in range(1, 6) for p in (0, 1)],
      "recursive_tuple_4_p2", "recursive_tuple_4_p3", "recursive_tuple_5_p2", "recursive_tuple_5_p3")
_lost("1.6.1", "public", BOTH, OBJECT_RECORD, "00000000000000cb")
_lost("1.6.1", "public", BOTH, PROTOCOL_0_1, "00000000000f4628", "00000000000f4629")
_lost("1.6.1", "shapes", BOTH, PROTOCOL_0_1, "p0_string_escapes", "p0_unicode_ns_key")
_lost("1.6.1", "shapes", BOTH, REDUCE_AS_NEWOBJ, *[f"{shape}_p{p}" for p in (2, 3) for shape in (
    "reduce_empty_args_build", "reduce_args_build", "partial_build")])
_lost("1.6.1", "shapes", ("dict",), CONTENTS, *[f"{shape}_p{p}" for p in (2, 3) for shape in (
    "ordereddict_subclass_with_dict", "ordereddict_subclass_plain", "ordereddict", "defaultdict", "deque",
    "list_subclass_with_dict", "dict_subclass_with_dict", "reduce_five_keys")])
_lost("1.6.1", "shapes", ("pg_json",), REDUCE_AS_NEWOBJ, *[f"{shape}_p{p}" for p in (2, 3) for shape in (
    "ordereddict_subclass_with_dict", "reduce_five_keys")])
_lost("1.6.1", "shapes", BOTH, NEWOBJ_AS_REDUCE, "newobj_args_no_build_p2", "newobj_args_no_build_p3")
_lost("1.6.1", "shapes", BOTH, NUL_KEY, "nul_texts_p2", "nul_texts_p3")
# The catalog's lexicons (their splitters and normalizers) and CMFEditions' modifiers: objects without state.
_lost("1.6.1", "plone", BOTH, NEWOBJ_AS_REDUCE, "0000000000000e15", "0000000000000e16", "0000000000000e17",
      *[f"00000000000010{n}" for n in ("c5", "c6", "c7", "c8", "c9", "ca", "cb", "cc", "cd", "d0")])


#: Records whose JSON lost the object and names, in its place, a callable that is no plain name: the globals
#: policy's hard rule refuses it (docs/security.md), where the encoders wrote a record that loaded wrong.
REFUSED_BY_POLICY: dict = {}
for _version in VERSIONS:
    for _path in BOTH:
        REFUSED_BY_POLICY[(_version, "shapes", _path)] = {"marker_lookalikes_p2", "marker_lookalikes_p3"}
for _path in BOTH:
    REFUSED_BY_POLICY[("1.6.1", "shapes", _path)] |= {"partial_build_p2", "partial_build_p3"}


def _rows(version: str, name: str) -> list:
    return [row for row in vectors(name, version) if row["dict"] is not None]


def _loads_the_same(original: bytes, again: bytes) -> bool:
    try:
        return same_records(original, again)
    except Exception:  # noqa: BLE001 - JSON that lost the object may give a record nothing can load
        return False


def _stored(rows: list, path: str, dsn: str) -> list:
    """What each row's JSON is when a storage reads it back: the dict, or the text after a jsonb column."""
    if path == "dict":
        return [json.loads(row["dict"]) for row in rows]
    texts = jsonb_texts(dsn, [row["pg_json"][2] for row in rows])
    return [{"@cls": row["pg_json"][:2], "@s": json.loads(text)} for row, text in zip(rows, texts)]


@pytest.mark.slow  # every record of every set, through a jsonb column
@pytest.mark.parametrize("path", BOTH)
@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("version", VERSIONS)
def test_what_each_release_wrote_reads_back(impl, version, name, path, module_pg_dsn):
    rows = [row for row in _rows(version, name) if path == "dict" or row["pg_json"] is not None]
    assert rows
    lost = {}
    for row, stored in zip(rows, _stored(rows, path, module_pg_dsn)):
        try:
            if path == "dict":
                again = impl.encode_zodb_record(stored)
            else:
                again = impl.encode_zodb_record_from_pg_json(stored["@cls"][0], stored["@cls"][1],
                                                             json.dumps(stored["@s"]))
        except ValueError as exc:
            lost[row["oid"]] = f"refused: {exc}"
            continue
        if not _loads_the_same(row_record(row), again):
            lost[row["oid"]] = "different"
    expected = LOST_IN_JSON.get((version, name, path), {})
    assert sorted(lost) == sorted(expected), {oid: lost.get(oid, "read back") for oid in set(lost) ^ set(expected)}
    refused = {oid for oid, v in lost.items() if v.startswith("refused")}
    assert refused == REFUSED_BY_POLICY.get((version, name, path), set()), lost
    assert all("a callable must be a plain name" in lost[oid] for oid in refused), lost


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_same_json_as_1_7_0_where_it_is_right(impl, name):
    rows = faithful(name, "1.7.0")
    assert rows
    for row in rows:
        data = row_record(row)
        assert json.dumps(impl.decode_zodb_record(data), ensure_ascii=False) == row["dict"], row["oid"]
        module, cls, state_json, refs = impl.decode_zodb_record_for_pg_json(data)
        ref_module, ref_cls, ref_json, ref_refs = row["pg_json"]
        assert (module, cls, state_json) == (ref_module, ref_cls, ref_json), row["oid"]
        assert set(ref_refs) <= set(refs), row["oid"]


# ---------------------------------------------------------------------------
# 1.7.0's shapes, by hand (docs/format.md, "Markers")
# ---------------------------------------------------------------------------

def _counted() -> rustshapes.Counted:
    c = rustshapes.Counted()
    c.x = 7
    return c


def _odsub() -> rustshapes.ODSub:
    od = rustshapes.ODSub([("z", 1), ("a", 2)])
    od.attr = "kept"
    return od


def _both() -> rustshapes.Both:
    both = rustshapes.Both([4, 5])
    both.extra = {"k": "v"}
    both.tag = "both"
    return both


def _kw_with_state() -> rustshapes.KwNewWithState:
    obj = rustshapes.KwNewWithState(7, k="kw")
    obj.extra = "state"
    return obj


def _cls(name: str) -> dict:
    return {"@cls": ["rustshapes", name]}


NEWOBJ_EX_CALL = {"@cls": ["copyreg", "__newobj_ex__"]}

# (object, protocol, what 1.7.0 writes for it): every decoder writes the same, every path gives it back.
SHAPES_1_7_0 = {
    "reduce without arguments, then BUILD": (
        _counted(), 3, {"@cls": ["rustshapes", "Counted"], "@s": {"x": 7}, "@newobj": False}),
    "the same with dict items": (
        _odsub(), 3, {"@cls": ["rustshapes", "ODSub"], "@s": {"attr": "kept"}, "@newobj": False,
                      "@items": [["z", 1], ["a", 2]]}),
    "the same with all five keys": (
        _both(), 3, {"@cls": ["rustshapes", "Both"], "@s": {"tag": "both"}, "@newobj": False,
                     "@items": [["k", "v"]], "@appends": [4, 5]}),
    "NEWOBJ with arguments, no BUILD": (
        rustshapes.NoState(0), 3, {"@reduce": {"callable": _cls("NoState"), "args": {"@t": [1, "two"]},
                                               "newobj": True}}),
    "REDUCE with arguments, then BUILD": (
        rustshapes.ReducedWithArgs("x", [1]), 3,
        {"@reduce": {"callable": _cls("ReducedWithArgs"), "args": {"@t": ["x", [1]]}, "state": {"c": 3}}}),
    "NEWOBJ_EX": (
        rustshapes.KwNew(1, k="v"), 4,
        {"@reduce": {"callable": NEWOBJ_EX_CALL, "args": {"@t": [_cls("KwNew"), {"@t": [1]}, {"k": "v"}]}}}),
    "NEWOBJ_EX, then BUILD": (
        _kw_with_state(), 4,
        {"@reduce": {"callable": NEWOBJ_EX_CALL, "args": {"@t": [_cls("KwNewWithState"), {"@t": [7]}, {"k": "kw"}]},
                     "state": {"extra": "state"}}}),
    "NEWOBJ_EX without arguments": (
        rustshapes.EmptyBoth(), 4,
        {"@reduce": {"callable": NEWOBJ_EX_CALL, "args": {"@t": [_cls("EmptyBoth"), {"@t": []}, {}]},
                     "state": {"tag": "t"}}}),
    "an OrderedDict": (
        collections.OrderedDict([("b", 1)]), 3,
        {"@reduce": {"callable": {"@cls": ["collections", "OrderedDict"]}, "args": {"@t": []},
                     "items": [["b", 1]]}}),
    "keys that spell an escape": (
        {"@ns:plain": 1, "@ns:AA==": 2, "@su:x": 3}, 3,
        {"@ns:QG5zOnBsYWlu": 1, "@ns:QG5zOkFBPT0=": 2, "@su:x": 3}),
}


@pytest.mark.parametrize("shape", SHAPES_1_7_0)
def test_writes_and_reads_what_1_7_0_writes(impl, shape):
    value, protocol, written = SHAPES_1_7_0[shape]
    data = record({"v": value}, protocol)
    assert impl.decode_zodb_record(data)["@s"] == {"v": written}
    assert json.loads(impl.decode_zodb_record_for_pg_json(data)[2]) == {"v": written}
    for path in PATHS:
        (again,) = records_back(impl, [data], path)
        assert same_records(data, again), path
    # what 1.7.0 writes, given to every encoder
    assert same_records(data, impl.encode_zodb_record({"@cls": list(APP), "@s": {"v": written}}))
    assert same_records(data, impl.encode_zodb_record_from_pg_json(*APP, json.dumps({"v": written})))
    single = pickle.dumps({"v": value}, protocol)
    for again in (impl.dict_to_pickle({"v": written}), impl.json_to_pickle(json.dumps({"v": written}))):
        assert _same_pickles(single, again)


APP = ("app.mod", "Kls")


def _loaded(data: bytes) -> object:
    return fidelity.Loader(io.BytesIO(data), encoding="bytes").load()


def _same_pickles(a: bytes, b: bytes) -> bool:
    return fidelity.same(_loaded(a), _loaded(b))


# ---------------------------------------------------------------------------
# Shapes written before 1.7.0 (by 1.6.1, by 1.7.0's own development, by this codec before)
# ---------------------------------------------------------------------------

LEGACY = {
    "1.6.1's NEWOBJ_EX": (
        rustshapes.KwNew(5, k="legacy"),
        {"@reduce": {"callable": _cls("KwNew"), "args": {"@args": {"@t": [5]}, "@kwargs": {"k": "legacy"}}}}),
    "the same with a newobj flag": (
        rustshapes.KwNew(5, k="legacy"),
        {"@reduce": {"callable": _cls("KwNew"), "args": {"@args": {"@t": [5]}, "@kwargs": {"k": "legacy"}},
                     "newobj": True}}),
    "1.6.1's NEWOBJ_EX then BUILD": (
        _kw_with_state(),
        {"@cls": ["rustshapes", "KwNewWithState"],
         "@s": {"@args": {"@args": {"@t": [7]}, "@kwargs": {"k": "kw"}}, "@state": {"extra": "state"}}}),
    "this codec's NEWOBJ_EX then BUILD": (
        _kw_with_state(),
        {"@newobj": {"callable": _cls("KwNewWithState"), "args": {"@t": [7]}, "kwargs": {"k": "kw"},
                     "state": {"extra": "state"}}}),
    "this codec's NEWOBJ without BUILD": (
        rustshapes.NoState(0), {"@newobj": {"callable": _cls("NoState"), "args": {"@t": [1, "two"]}}}),
    "this codec's REDUCE without arguments then BUILD": (
        _odsub(), {"@reduce": {"callable": _cls("ODSub"), "args": {"@t": []}, "state": {"attr": "kept"},
                               "items": [["z", 1], ["a", 2]]}}),
    "1.6.1's BUILD after a call of a call (@inst)": (
        rustshapes.ViaPartial(),
        {"@inst": {"@callable": {"@reduce": {"callable": {"@cls": ["functools", "partial"]},
                                             "args": {"@t": [_cls("make")]},
                                             "state": {"@t": [_cls("make"), {"@t": [1]}, {}, None]}}},
                   "@args": {"@t": []}, "@state": {"extra": 2}}}),
    "1.6.1's copy_reg._reconstructor instance": (
        None, {"@cls": ["copy_reg", "_reconstructor"],
               "@s": {"@args": {"@t": [_cls("Plain"), {"@cls": ["__builtin__", "object"]}, None]},
                      "@state": {"x": 1}}}),
}


def _legacy_original(shape: str) -> bytes:
    """The pickle of {"v": the object} whose JSON the shape is."""
    obj, _ = LEGACY[shape]
    if obj is not None:
        return pickle.dumps({"v": obj}, 4 if isinstance(obj, rustshapes.KwNew) else 3)
    p = rustshapes.Plain()
    p.x = 1
    return pickle.dumps({"v": p}, 1)  # protocol 1 writes copy_reg._reconstructor and BUILD


def _as_record(state_pickle: bytes) -> bytes:
    return pickle.dumps(APP_CLASS, 3) + state_pickle


@pytest.mark.parametrize("shape", LEGACY)
def test_reads_the_shapes_written_before_1_7_0(impl, shape):
    original = _legacy_original(shape)
    state = {"v": LEGACY[shape][1]}
    for again in (impl.dict_to_pickle(state), impl.json_to_pickle(json.dumps(state))):
        assert _same_pickles(original, again)
    want = _as_record(original)
    assert same_records(want, impl.encode_zodb_record({"@cls": list(APP), "@s": state}))
    assert same_records(want, impl.encode_zodb_record_from_pg_json(*APP, json.dumps(state)))


# ---------------------------------------------------------------------------
# Bad JSON: a ValueError naming the key, from every encoder of both twins, as 1.7.0 refuses it
# ---------------------------------------------------------------------------

# The record encoders read the compact forms of references (pickle_to_dict writes the verbose one).
BAD_REFS = {
    "compact @ref without a class path": ({"@ref": ["0000000000000001", 5]}, "compact @ref"),
    "compact @ref with an oid that is not hex": ({"@ref": ["00000000000000zz", "a.B"]}, "oid"),
}
BAD = {
    "@ns that is not base64": ({"@ns": "!!"}, "@ns"),
    "@ns that is not UTF-8": ({"@ns": "/w=="}, "@ns"),
    "@inst of another shape": ({"@inst": {"x": 1}}, "@inst"),
    "@inst with a stray key": ({"@inst": {"@obj": {}, "@state": {}, "junk": 1}}, "@inst"),
    "@inst that is not an object": ({"@inst": 5}, "@inst"),
    "@newobj that is not a boolean": ({"@cls": ["a", "b"], "@s": {}, "@newobj": "no"}, "@newobj"),
    "newobj in @reduce that is not a boolean": (
        {"@reduce": {"callable": {"@cls": ["a", "b"]}, "args": {"@t": []}, "newobj": 1}}, "newobj"),
    "@items without @s": ({"@cls": ["a", "b"], "@items": []}, "@s"),
    "@newobj without @s": ({"@cls": ["a", "b"], "@newobj": False}, "@s"),
    "an unknown key in @reduce": ({"@reduce": {"callable": 1, "args": 2, "kwargs": {}}}, "'kwargs'"),
}


def _every_encoder(impl, state: dict) -> tuple:
    return (
        lambda: impl.encode_zodb_record({"@cls": list(APP), "@s": state}),
        lambda: impl.encode_zodb_record_from_pg_json(*APP, json.dumps(state)),
        lambda: impl.dict_to_pickle(state),
        lambda: impl.json_to_pickle(json.dumps(state)),
    )


@pytest.mark.parametrize("case", list(BAD) + list(BAD_REFS))
def test_bad_json_is_a_value_error_naming_the_key(impl, case):
    value, key = BAD[case] if case in BAD else BAD_REFS[case]
    calls = _every_encoder(impl, {"v": value})
    for call in calls if case in BAD else calls[:2]:
        with pytest.raises(ValueError) as caught:
            call()
        assert key in str(caught.value), caught.value


def test_a_key_that_is_no_escape_stays_a_key(impl):
    state = {"v": {"@ns:/w==": 1, "@ns:plain": 2, "@su:QUJD": 3}}  # not base64 of what a decoder escapes
    record_encoders, pickle_encoders = _every_encoder(impl, state)[:2], _every_encoder(impl, state)[2:]
    for call in record_encoders:
        assert fidelity.load_record(call())[1] == state
    for call in pickle_encoders:
        assert pickle.loads(call()) == state
