"""Object records: records whose first pickle is not class metadata, for each twin.

ZODB's own storage tests write them (``PackableStorage.pdumps`` and ``dumps``
put an instance where the class pickle goes), and ZODB itself writes the
class of an instance of a persistent class without a module as a persistent
reference to that class.  Every decoder gives the class ``["", ""]`` and the
state ``{"@obj": first pickle, "@state": state}`` (docs/format.md, "Class
metadata"); ``encode_zodb_record`` writes both pickles back.
"""

from __future__ import annotations

import base64
import io
import json

import pytest
import transaction
import ZODB
import ZODB.FileStorage
import ZODB.persistentclass
from persistent import Persistent
from ZODB.serialize import referencesf
from ZODB.tests.PackableStorage import C, Object, Root, dumps, pdumps
from ZODB.utils import p64, u64

from helpers import PATHS, Ref, record, records_back, same_records
from pgjsonb import jsonb_texts, record_after_jsonb
from zodb_json_codec._db import fidelity as _fidelity

PACKABLE = "ZODB.tests.PackableStorage"


def _b64_oid(n: int) -> dict:
    return {"@b": base64.b64encode(p64(n)).decode()}


def _root_with_references() -> bytes:
    root = Root()
    root.obj = Object(p64(3))
    root.name = "root"
    root.more = [Object(p64(4)), Object(p64(3))]
    return dumps(root)


def _persistent_class_database(path: str) -> ZODB.DB:
    """Instances of persistent classes without a module: ZODB names their class by a reference."""
    db = ZODB.DB(ZODB.FileStorage.FileStorage(path))
    conn = db.open()
    plain = ZODB.persistentclass.PersistentMetaClass("Plain", (Persistent,), {"x": 1, "__module__": ""})
    conn.root()["Plain"] = plain
    transaction.commit()
    instance = plain()
    instance.y = 5
    conn.root()["instance"] = instance
    transaction.commit()
    conn.close()
    return db


@pytest.fixture(scope="module")
def class_db(tmp_path_factory):
    db = _persistent_class_database(str(tmp_path_factory.mktemp("classes") / "Data.fs"))
    yield db
    db.close()


def _instance_record(db: ZODB.DB) -> bytes:
    conn = db.open()
    try:
        oid = conn.root()["instance"]._p_oid
    finally:
        conn.close()
    data, _ = db.storage.load(oid)
    return data


# name -> (record, the decoded state, refs)
EXPECTED = {
    "pdumps(Object(oid))": (
        pdumps(Object(p64(5))),
        {"@obj": {"@cls": [PACKABLE, "Object"], "@s": {"_oid": _b64_oid(5)}}, "@state": None},
        [],
    ),
    "pdumps(C())": (
        pdumps(C()),
        {"@obj": {"@cls": [PACKABLE, "C"], "@s": {}}, "@state": None},
        [],
    ),
    "dumps(Root) with bare-oid references": (
        _root_with_references(),
        {"@obj": {"@cls": [PACKABLE, "Root"], "@s": {
            "obj": {"@ref": _b64_oid(3)}, "name": "root",
            "more": [{"@ref": _b64_oid(4)}, {"@ref": _b64_oid(3)}]}},
         "@state": None},
        [3, 4, 3],
    ),
}


def _all_records(class_db) -> dict:
    records = {name: data for name, (data, _, _) in EXPECTED.items()}
    records["persistent class reference (ZODB)"] = _instance_record(class_db)
    return records


def zodb_refs(data: bytes) -> list:
    return [u64(oid) for oid in referencesf(data)]


# ---------------------------------------------------------------------------
# The records are what the tests expect them to be
# ---------------------------------------------------------------------------

def _first_value(data: bytes):
    return _fidelity.Loader(io.BytesIO(data)).load()


def test_the_first_pickles_are_not_class_metadata(class_db):
    for name in EXPECTED:
        first = _first_value(EXPECTED[name][0])
        assert isinstance(first, _fidelity.Inert) and not isinstance(first, type), name  # an instance
    data = _instance_record(class_db)
    assert _first_value(data) == ("REF", p64(1))  # a reference to the class, which is object 1
    assert zodb_refs(data) == [1]


# ---------------------------------------------------------------------------
# Every decoder
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_record_decoder_keeps_the_first_pickle(impl, name):
    data, state, refs = EXPECTED[name]
    assert zodb_refs(data) == refs
    assert impl.decode_zodb_record(data) == {"@cls": ["", ""], "@s": state}
    assert impl.decode_zodb_record_for_pg(data) == ("", "", state, refs)
    module, cls, text, pg_refs = impl.decode_zodb_record_for_pg_json(data)
    assert (module, cls, json.loads(text), pg_refs) == ("", "", state, refs)


def test_a_persistent_class_reference(impl, class_db):
    data = _instance_record(class_db)
    state = {"@obj": {"@ref": _b64_oid(1)}, "@state": {"y": 5}}
    assert impl.decode_zodb_record(data) == {"@cls": ["", ""], "@s": state}
    assert impl.decode_zodb_record_for_pg(data) == ("", "", state, [1])
    assert impl.decode_zodb_record_for_pg_json(data) == (
        "", "", '{"@obj":{"@ref":{"@b":"AAAAAAAAAAE="}},"@state":{"y":5}}', [1])


def test_other_values_in_the_first_pickle(impl):
    # (class reference, arguments), as ZODB would write one with __getnewargs__, and a plain value.
    data = record({"a": 1}, klass=(Ref((p64(9), None)), ("arg",)))
    assert impl.decode_zodb_record_for_pg(data) == (
        "", "", {"@obj": {"@t": [{"@ref": "0000000000000009"}, {"@t": ["arg"]}]}, "@state": {"a": 1}}, [9])
    assert zodb_refs(data) == [9]
    roundtrip_everywhere(impl, data)


def test_single_pickle_functions_read_the_first_pickle(impl):
    data = pdumps(Object(p64(5)))
    value = impl.pickle_to_dict(data)
    assert value == {"@cls": [PACKABLE, "Object"], "@s": {"_oid": _b64_oid(5)}}
    for again in (impl.dict_to_pickle(value), impl.json_to_pickle(impl.pickle_to_json(data))):
        assert _fidelity.same(_first_value(data), _first_value(again))


# ---------------------------------------------------------------------------
# Back to records: the dict path, the JSON text, a real jsonb column
# ---------------------------------------------------------------------------

def roundtrip_everywhere(impl, data: bytes, pg_dsn: str = None) -> None:
    """Every path (helpers.PATHS; with pg_dsn also through a real jsonb column) gives the same record back."""
    module, name, pg_state, _ = impl.decode_zodb_record_for_pg(data)
    again = [records_back(impl, [data], path)[0] for path in PATHS]
    again.append(impl.encode_zodb_record({"@cls": [module, name], "@s": pg_state}))  # the dict variant as it is
    if pg_dsn is not None:
        again.extend(records_back(impl, [data], path, lambda texts: jsonb_texts(pg_dsn, texts))[0]
                     for path in PATHS if path != "dict")
    for back in again:
        assert same_records(data, back)
        assert referencesf(back) == referencesf(data)  # pack finds the same objects
        assert impl.decode_zodb_record(back) == impl.decode_zodb_record(data)


def test_every_path_gives_the_same_objects_back(impl, class_db, pg_dsn):
    for data in _all_records(class_db).values():
        roundtrip_everywhere(impl, data, pg_dsn)


def test_the_instance_record_loads_in_zodb_after_the_codec(impl, class_db, pg_dsn, tmp_path):
    # Every record of the database through the jsonb path into a new storage, then ZODB opens it.
    copy = ZODB.FileStorage.FileStorage(str(tmp_path / "copy.fs"))
    for txn in class_db.storage.iterator():
        copy.tpc_begin(txn, txn.tid, txn.status)
        for rec in txn:
            copy.restore(rec.oid, rec.tid, record_after_jsonb(impl, rec.data, pg_dsn), "", None, txn)
        copy.tpc_vote(txn)
        copy.tpc_finish(txn)
    db = ZODB.DB(copy)
    try:
        conn = db.open()
        instance = conn.root()["instance"]
        assert (type(instance).__name__, instance.x, instance.y) == ("Plain", 1, 5)
        assert type(instance) is conn.root()["Plain"]
        conn.close()
    finally:
        db.close()


def test_the_verbatim_fallback_still_applies(impl):
    # A first pickle that contains itself: JSON cannot carry it, the record is kept verbatim.
    loop: list = []
    loop.append(loop)
    data = pdumps(loop)
    assert impl.decode_zodb_record(data) == {"@cls": ["", ""], "@s": {"@pkl": _b64(data)}}
    assert impl.encode_zodb_record(impl.decode_zodb_record(data)) == data
    module, name, text, _ = impl.decode_zodb_record_for_pg_json(data)
    assert impl.encode_zodb_record({"@cls": [module, name], "@s": json.loads(text)}) == data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ---------------------------------------------------------------------------
# The wrapper is only an object record with the class ["", ""]
# ---------------------------------------------------------------------------

def test_a_user_dict_of_the_wrapper_shape_stays_a_dict(impl):
    data = record({"@obj": 1, "@state": 2}, klass=(("app", "Kls"), None))
    out = impl.decode_zodb_record(data)
    assert out == {"@cls": ["app", "Kls"], "@s": {"@d": [["@obj", 1], ["@state", 2]]}}
    assert same_records(data, impl.encode_zodb_record(out))


@pytest.mark.parametrize("cls", [["app", "Kls"], ["", "Kls"], ["app", ""]])
def test_with_another_class_the_wrapper_is_the_state(impl, cls):
    # A class with one name empty is no class: the globals policy refuses it (docs/security.md); written
    # without the policy, the wrapper is the state all the same.
    from zodb_json_codec import GlobalRefused, GlobalsPolicy

    value = {"@cls": cls, "@s": {"@obj": 1, "@state": 2}}
    if "" in cls:
        with pytest.raises(GlobalRefused, match="the record's class"):
            impl.encode_zodb_record(value)
        with pytest.warns(RuntimeWarning):
            record = impl.encode_zodb_record(value, policy=GlobalsPolicy("unrestricted"))
    else:
        record = impl.encode_zodb_record(value)
    (name, args), state = _fidelity.load_record(record)
    assert (name, args, state) == (".".join(cls), None, {"@obj": 1, "@state": 2})


def test_the_class_pickle_of_an_object_record_is_the_first_value(impl):
    record = impl.encode_zodb_record({"@cls": ["", ""], "@s": {"@obj": {"@t": [1, "a"]}, "@state": [2]}})
    (first, _), state = _fidelity.load_record(record)
    assert (first, state) == ((1, "a"), [2])


def test_the_state_pickle_may_make_the_first_value_contain_itself(impl):
    # ZODB reads both pickles with one memo: here the state pickle appends the
    # first pickle's list to itself, and the record is kept verbatim.
    data = b"\x80\x03]q\x00." + b"\x80\x03h\x00h\x00a0N."
    for decoded in (impl.decode_zodb_record(data)["@s"], impl.decode_zodb_record_for_pg(data)[2]):
        assert decoded == {"@pkl": _b64(data)}


def test_values_shared_by_both_pickles(impl, pg_dsn):
    shared = ["x", {"k": 1}]
    # an instance in the class pickle's place, as pdumps writes; the state's list fetched from its memo
    data = record({"again": shared}, klass=Object(shared))
    assert b"h" in data[data.index(b".\x80\x03"):]  # the state pickle does use the memo
    state = impl.decode_zodb_record(data)["@s"]
    assert state == {"@obj": {"@cls": [PACKABLE, "Object"], "@s": {"_oid": shared}}, "@state": {"again": shared}}
    roundtrip_everywhere(impl, data, pg_dsn)
