"""Records written by ZODB itself: every revision of two FileStorages built here, for each twin.

A multi-database (two FileStorages) holds persistent objects of the classes
in ``zodbapp`` with attributes of every kind, PersistentMapping,
PersistentList, BTrees split into many buckets, a Length, weak references
and cross-database references.  For every record revision (as the storage
iterator gives them) the codec's promises are checked: decode -> encode
loses nothing on each path a storage takes (helpers.PATHS; the PostgreSQL
ones after a real jsonb column),
``refs`` holds every oid ZODB's own ``referencesf`` finds, and the class is
named right.  Then the shapes the reference's users rely on.
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import io
import json
import math
import re
import uuid
import zoneinfo
from types import SimpleNamespace

import pytest
import pytz
import transaction
import ZODB
import ZODB.FileStorage
from BTrees.IIBTree import IIBTree
from BTrees.IOBTree import IOBTree
from BTrees.Length import Length
from BTrees.OOBTree import OOBTree, OOTreeSet
from persistent import Persistent
from persistent.list import PersistentList
from persistent.mapping import PersistentMapping
from persistent.wref import WeakRef
from ZODB.serialize import referencesf
from ZODB.utils import p64, u64

import cpython_pickle
import zodbapp
from helpers import PATHS, records_back, same_records
from pgjsonb import jsonb_texts, record_after_jsonb
from zodb_json_codec._db import fidelity as _fidelity

UTC = datetime.timezone.utc
TREE_SIZE = 3000


# ---------------------------------------------------------------------------
# The databases
# ---------------------------------------------------------------------------

def _scalars():
    return dict(
        s_ascii="hello",
        s_non_ascii="héllo wörld ✓ 😀 中文 Ωμέγα",
        s_nul="a\x00b",
        s_only_nul="\x00",
        s_controls="\x08\x0c\n\r\t\"\\/\x01\x1f\x7f",
        s_separators="\u2028\u2029",
        s_surrogate="lone \ud800 surrogate",
        s_empty="",
        s_long="x" * 70000,
        ints=[0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
              2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, 2**200, -(2**200), 10**400],
        floats=[0.0, -0.0, 1.0, 0.1, -2.5, 1e15, 1e16, 1e17, 1e300, 1e-4, 1e-5, 1e-7, 2.5e-10,
                5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 123456.789,
                float("nan"), float("inf"), float("-inf")],
        nan=float("nan"), inf=float("inf"), neg_inf=float("-inf"), neg_zero=-0.0,
        big_float=1e16, small_float=1e-7,
        b_empty=b"", b_short=b"\x00\xff", b_all=bytes(range(256)), b_long=b"\xab" * 300,
        truth=True, falsity=False, nothing=None,
        ba=bytearray(b"\x00bytearray\xff"),
        cplx=complex(1.5, -2.0),
    )


def _containers():
    shared = [1, 2, 3]
    return dict(
        tuples=((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((1, (2, (3,))),)),
        lst=[1, "two", 3.0, None, [4, [5, [6]]], (7,)],
        empty_list=[], empty_dict={},
        int_keys={1: "one", -2: "minus two", 2**70: "big"},
        tuple_keys={(1, 2): "a", ("x", ("y",)): "b"},
        mixed_keys={None: 0, True: 1, b"raw": 2, "text": 3, 4.5: 4, frozenset({1, 2}): 5},
        nul_keys={"nul\x00key": 1, "\x00": 2, "plain": 3},
        surrogate_keys={"k\udc80": 1},
        marker_keys=[{"@t": [1, 2]}, {"@cls": ["os", "system"], "@s": "ls"}, {"@ns:AAAA": 1},
                     {"@id": "https://example.org/x", "@type": "Thing"}, {"@d": []},
                     {"@ref": "0000000000000001"}, {"@kv": [[1, 2]]}, {"@b": "AAAA"},
                     {"@dt": "2020-01-01T00:00:00", "@tz": {"zoneinfo": "UTC"}}, {"@f": "nan"},
                     {"@args": [1], "@state": {}}, {"@su:AAAA": 0}],
        sets=[set(), {1, 2, 3}, {"a", (1, 2)}, frozenset(), frozenset({b"x", 2.5})],
        shared=[shared, shared, {"again": shared}],
        plain=zodbapp.Plain(a=1, nested=zodbapp.Plain(b=[1, 2, {"c": zodbapp.Plain()}])),
        plain_slots=_plain_slots(),
    )


def _plain_slots():
    p = zodbapp.PlainSlots()
    p.x = [1, 2]
    p.y = "in __dict__"
    return p


def _times():
    vienna_pytz = pytz.timezone("Europe/Vienna")
    eastern_pytz = pytz.timezone("US/Eastern")
    return dict(
        naive=datetime.datetime(2025, 6, 15, 12, 30, 45),
        naive_us=datetime.datetime(2025, 6, 15, 12, 30, 45, 123456),
        utc=datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        plus=datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
        minus=datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(-datetime.timedelta(hours=8))),
        seconds=datetime.datetime(2025, 1, 2, 3, 4, 5,
                                  tzinfo=datetime.timezone(datetime.timedelta(hours=1, minutes=2, seconds=3))),
        minus_seconds=datetime.datetime(2025, 1, 2, 3, 4, 5,
                                        tzinfo=datetime.timezone(-datetime.timedelta(hours=5, seconds=15))),
        micro_offset=datetime.datetime(2025, 1, 2, tzinfo=datetime.timezone(datetime.timedelta(microseconds=1500))),
        named=datetime.datetime(2025, 1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=1), "CET")),
        pytz_utc=datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=pytz.utc),
        pytz_summer=vienna_pytz.localize(datetime.datetime(2025, 7, 1, 12, 0)),
        pytz_winter=vienna_pytz.localize(datetime.datetime(2025, 1, 1, 12, 0)),
        pytz_lmt=datetime.datetime(2025, 1, 1, tzinfo=vienna_pytz),
        pytz_eastern=eastern_pytz.localize(datetime.datetime(2024, 11, 3, 1, 30), is_dst=False),
        minimum=datetime.datetime.min, maximum=datetime.datetime.max,
        day=datetime.date(2025, 6, 15), first_day=datetime.date.min, last_day=datetime.date.max,
        clock=datetime.time(12, 30, 45), clock_us=datetime.time(0, 0, 0, 1),
        clock_tz=datetime.time(12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=-3, minutes=-30))),
        clock_pytz=datetime.time(12, 30, tzinfo=pytz.utc),
        deltas=[datetime.timedelta(0), datetime.timedelta(days=-1, seconds=5),
                datetime.timedelta(microseconds=-1), datetime.timedelta(days=999999999),
                datetime.timedelta.min],
        decimals=[decimal.Decimal(t) for t in
                  ("1.10", "-0", "0E-10", "1E+5", "NaN", "-NaN123", "sNaN", "Infinity", "-Infinity",
                   "3.14159265358979323846264338327950288419716939937510")],
        uuids=[uuid.UUID("12345678-1234-5678-1234-567812345678"), uuid.UUID(int=0),
               uuid.UUID(int=2**128 - 1)],
    )


def _zoneinfo_values():
    vienna = zoneinfo.ZoneInfo("Europe/Vienna")
    return dict(
        zone=datetime.datetime(2025, 3, 30, 2, 30, tzinfo=vienna),
        zone_utc=datetime.datetime(2025, 3, 30, tzinfo=zoneinfo.ZoneInfo("UTC")),
        zone_fold=datetime.datetime(2025, 10, 26, 2, 30, fold=1, tzinfo=vienna),
        clock_zone=datetime.time(12, 30, tzinfo=vienna),
        zones=[vienna, vienna, zoneinfo.ZoneInfo("America/New_York")],
    )


def _stdlib_record(obj, zoneinfo_flag=cpython_pickle.C_FLAG) -> bytes:
    """A record as ZODB's ObjectWriter writes it, but pickled by the stdlib.

    ZODB pickles with zodbpickle, which cannot pickle a ``ZoneInfo`` at
    protocol 3 on CPython (``ZoneInfo.__reduce__`` names the bound method
    ``ZoneInfo._unpickle``; CPython's pickle spells it as
    ``builtins.getattr(ZoneInfo, "_unpickle")``, zodbpickle gives up).  So
    the zoneinfo values are stored in records written by CPython's pickle,
    protocol 3, with ZODB's class metadata, one pickler for both pickles and
    its persistent ids.  The ZoneInfo cache flag is CPython's int 1 on every
    interpreter (see cpython_pickle), or with zoneinfo_flag=bool the True of
    the pure-Python zoneinfo (PyPy's).
    """
    def persistent_id(o):
        if isinstance(o, Persistent) and o._p_oid is not None:
            if hasattr(type(o), "__getnewargs__"):
                return o._p_oid
            return o._p_oid, type(o)
        return None

    f = io.BytesIO()
    p = cpython_pickle.Pickler(f, 3, zoneinfo_flag=zoneinfo_flag, persistent_id=persistent_id)
    p.dump(type(obj))
    p.dump(obj.__getstate__())
    return f.getvalue()


def _build(directory) -> SimpleNamespace:
    databases: dict = {}
    storages = {
        "main": ZODB.FileStorage.FileStorage(str(directory / "main.fs")),
        "other": ZODB.FileStorage.FileStorage(str(directory / "other.fs")),
    }
    dbs = {name: ZODB.DB(storage, databases=databases, database_name=name)
           for name, storage in storages.items()}
    tm = transaction.TransactionManager()
    conn = dbs["main"].open(tm)
    other_conn = conn.get_connection("other")
    oids: dict = {}
    try:
        # The other database first: an object reachable from two databases
        # must already belong to one of them.
        other_root = other_conn.root()
        other_root["item"] = other_item = zodbapp.Item(name="in the other database")
        other_root["keyed"] = other_keyed = zodbapp.Keyed("other-key")
        tm.commit()

        root = conn.root()
        root["keyed"] = keyed = zodbapp.Keyed("k1")
        root["scalars"] = scalars = zodbapp.Item(**_scalars())
        root["containers"] = zodbapp.Item(**_containers())
        root["times"] = zodbapp.Item(**_times())
        od = collections.OrderedDict([("b", 1), ("a", [2, 3]), ("c", zodbapp.Plain(z=1))])
        ad = zodbapp.AttrDict(one=1, two=(2,))
        ad.attr = "attribute"
        al = zodbapp.AttrList([1, "two", [3]])
        al.attr = {"x": 1}
        dd = collections.defaultdict(list, {"k": [1]})
        root["subclasses"] = subclasses = zodbapp.Item(od=od, ad=ad, al=al, dd=dd,
                                                       empty_od=collections.OrderedDict())
        slotted = zodbapp.Slotted()
        slotted.a = "slot a"
        slotted.b = [1, 2]
        root["slotted"] = slotted
        root["mapping"] = mapping = PersistentMapping({"k": "v", "n": 1, "nested": {"x": [1, 2]}})
        root["plist"] = plist = PersistentList(["a", 1, None, scalars])
        root["oobtree"] = oob = OOBTree()
        for i in range(TREE_SIZE):
            oob[f"k{i:05d}"] = (i, f"v{i}") if i % 3 else i * 1.5
        root["iobtree"] = iob = IOBTree()
        for i in range(TREE_SIZE):
            iob[i * 7] = [i, str(i)] if i % 2 else {"i": i}
        root["iibtree"] = iib = IIBTree()
        for i in range(2 * TREE_SIZE):
            iib[i] = -i
        root["treeset"] = ts = OOTreeSet()
        for i in range(TREE_SIZE):
            ts.add(("set", i))
        root["small_tree"] = OOBTree({"a": 1, "b": 2})
        root["empty_tree"] = OOBTree()
        root["length"] = length = Length(0)
        root["refs"] = zodbapp.Item(
            keyed=keyed, scalars=scalars, keyed_again=[keyed, (keyed,)],
            weak=WeakRef(scalars), weak_other=WeakRef(other_item),
            xref=other_item, xref_keyed=other_keyed, mapping=mapping)
        tm.commit()

        # More revisions: changes to objects, buckets and the tree.
        scalars.counter = 1
        length.change(TREE_SIZE)
        plist.append(keyed)
        mapping["more"] = (1, 2)
        for i in range(0, TREE_SIZE, 2):
            del oob[f"k{i:05d}"]
        for i in range(TREE_SIZE, TREE_SIZE + 500):
            oob[f"k{i:05d}"] = "added"
        od["later"] = 4
        subclasses._p_changed = True
        tm.commit()

        oids = {name: root[name]._p_oid for name in root}
        oids["other_item"] = other_item._p_oid
        oids["other_keyed"] = other_keyed._p_oid
        tree_items = list(oob.items())
        tree_first_bucket = oob._firstbucket._p_oid
        tm.abort()

        # Every revision, with the class ZODB itself loads for its oid.
        records = []
        classes = {}
        for dbname, storage in storages.items():
            jar = conn if dbname == "main" else other_conn
            for txn in storage.iterator():
                for r in txn:
                    if r.data is None:
                        continue
                    records.append(SimpleNamespace(db=dbname, oid=r.oid, tid=r.tid, data=r.data))
                    if (dbname, r.oid) not in classes:
                        klass = type(jar.get(r.oid))
                        classes[dbname, r.oid] = [klass.__module__, klass.__name__]
        # The zoneinfo values ZODB cannot write (see _stdlib_record), as
        # records of a storage of their own: as CPython pickles them (the
        # cache flag 1), and as PyPy does (True).
        zones = zodbapp.Item(keyed=keyed, scalars=scalars, **_zoneinfo_values())
        for name, oid, flag in [("zones", p64(1), cpython_pickle.C_FLAG),
                                ("zones_pure_python", p64(2), cpython_pickle.PURE_PYTHON_FLAG)]:
            records.append(SimpleNamespace(db="stdlib", oid=oid, tid=p64(0), data=_stdlib_record(zones, flag)))
            classes["stdlib", oid] = ["zodbapp", "Item"]
            oids[name] = oid
        latest = {}
        for rec in records:  # storage order: the last revision wins
            latest[rec.db, rec.oid] = rec
    finally:
        tm.abort()
        conn.close()
        for db in dbs.values():
            db.close()
    return SimpleNamespace(records=records, classes=classes, oids=oids, latest=latest,
                           tree_items=tree_items, tree_first_bucket=tree_first_bucket)


@pytest.fixture(scope="module")
def zodb(tmp_path_factory) -> SimpleNamespace:
    return _build(tmp_path_factory.mktemp("zodb"))


def _state_of(z, name: str, impl) -> dict:
    return impl.decode_zodb_record(z.latest["main", z.oids[name]].data)["@s"]


def _b64_oid(oid: bytes) -> str:
    return base64.b64encode(oid).decode("ascii")


# ---------------------------------------------------------------------------
# The database itself (so that the checks below check something)
# ---------------------------------------------------------------------------

def test_the_databases_hold_what_the_tests_need(zodb):
    classes = collections.Counter(tuple(c) for c in zodb.classes.values())
    for bucket in ("OOBucket", "IOBucket", "IIBucket"):
        assert classes["BTrees." + bucket[:2] + "BTree", bucket] >= 10, bucket
    assert classes["BTrees.OOBTree", "OOSet"] >= 10
    assert ("zodbapp", "Keyed") in classes and ("BTrees.Length", "Length") in classes
    revisions = collections.Counter((r.db, r.oid) for r in zodb.records)
    assert revisions["main", zodb.oids["scalars"]] == 2
    assert revisions["main", zodb.oids["oobtree"]] >= 2
    assert {r.db for r in zodb.records} == {"main", "other", "stdlib"}
    assert len(zodb.records) > 500
    assert all(r.data[:2] == b"\x80\x03" for r in zodb.records), "ZODB writes protocol 3"


def test_the_comparison_loads_every_record_and_sees_subclass_contents(zodb):
    # _fidelity's stand-ins take SETITEM(S) and APPEND(S) (an OrderedDict, a dict/list subclass instance) and
    # compare what they were given, so a change of the contents alone is a difference.
    import pickle

    for r in zodb.records:
        _fidelity.load_record(r.data)
    rec = zodb.latest["main", zodb.oids["subclasses"]]

    class Unpickler(pickle.Unpickler):  # persistent_load is read-only on 3.13 instances
        def persistent_load(self, pid):
            return None

    f = io.BytesIO(rec.data)
    Unpickler(f).load()
    state_at = f.tell()
    assert same_records(rec.data, rec.data)
    changed = rec.data[:state_at] + rec.data[state_at:].replace(b"later", b"LATER")
    assert changed != rec.data
    assert not same_records(rec.data, changed)


# ---------------------------------------------------------------------------
# The codec's promises, on every revision
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_nothing_lost(impl, zodb, path, kept_by):
    """decode -> keep -> encode gives the same objects; the JSON of the pg paths through a real jsonb column."""
    again = records_back(impl, [r.data for r in zodb.records], path, kept_by)
    lost = [(r.db, r.oid.hex(), zodb.classes[r.db, r.oid])
            for r, back in zip(zodb.records, again) if not same_records(r.data, back)]
    assert lost == []


def test_refs_contain_every_oid_zodb_finds(impl, zodb):
    checked = 0
    for r in zodb.records:
        module, name, _, refs = impl.decode_zodb_record_for_pg(r.data)
        assert type(refs) is list and all(type(x) is int for x in refs)
        want = {u64(oid) for oid in referencesf(r.data)}
        assert want <= set(refs), (r.db, r.oid.hex(), module, name)
        _, _, _, json_refs = impl.decode_zodb_record_for_pg_json(r.data)
        assert json_refs == refs
        checked += bool(want)
    assert checked > 100


def test_refs_include_the_bare_oid_of_a_getnewargs_object(impl, zodb):
    _, _, _, refs = impl.decode_zodb_record_for_pg(zodb.latest["main", zodb.oids["refs"]].data)
    for name in ("keyed", "scalars", "mapping"):
        assert u64(zodb.oids[name]) in refs, name


def test_every_record_names_its_class(impl, zodb):
    for r in zodb.records:
        want = zodb.classes[r.db, r.oid]
        assert impl.decode_zodb_record(r.data)["@cls"] == want, r.oid.hex()
        assert list(impl.decode_zodb_record_for_pg(r.data)[:2]) == want
        assert list(impl.decode_zodb_record_for_pg_json(r.data)[:2]) == want


def test_reencoding_is_idempotent(impl, zodb):
    for r in zodb.records:
        once = impl.encode_zodb_record(impl.decode_zodb_record(r.data))
        assert once[:2] == b"\x80\x03"
        assert impl.encode_zodb_record(impl.decode_zodb_record(once)) == once, r.oid.hex()


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------

def test_getnewargs_record_carries_its_arguments(impl, zodb):
    rec = impl.decode_zodb_record(zodb.latest["main", zodb.oids["keyed"]].data)
    assert rec == {"@cls": ["zodbapp", "Keyed"], "@s": {"@args": {"@t": ["k1"]}, "@state": {"key": "k1"}}}
    # and the class pickle written back carries them too: ((module, name), args)
    again = impl.encode_zodb_record(rec)
    (name, args), _ = _fidelity.load_record(again)
    assert (name, args) == ("zodbapp.Keyed", ("k1",))


def test_references_to_a_getnewargs_object_are_bare_oids(impl, zodb):
    state = _state_of(zodb, "refs", impl)
    bare = {"@ref": {"@b": _b64_oid(zodb.oids["keyed"])}}
    assert state["keyed"] == bare
    assert state["keyed_again"] == [bare, {"@t": [bare]}]
    root = impl.decode_zodb_record(zodb.latest["main", p64(0)].data)["@s"]
    assert root["data"]["keyed"] == bare
    # a normal persistent object: compact [oid hex, class]
    assert state["scalars"] == {"@ref": [zodb.oids["scalars"].hex(), "zodbapp.Item"]}
    assert state["mapping"] == {"@ref": [zodb.oids["mapping"].hex(), "persistent.mapping.PersistentMapping"]}


def test_weak_references(impl, zodb):
    state = _state_of(zodb, "refs", impl)
    assert state["weak"] == {"@ref": ["w", {"@t": [{"@b": _b64_oid(zodb.oids["scalars"])}]}]}
    assert state["weak_other"] == {
        "@ref": ["w", {"@t": [{"@b": _b64_oid(zodb.oids["other_item"])}, "other"]}]}


def test_cross_database_references(impl, zodb):
    state = _state_of(zodb, "refs", impl)
    assert state["xref"] == {"@ref": ["m", {"@t": [
        "other", {"@b": _b64_oid(zodb.oids["other_item"])}, {"@cls": ["zodbapp", "Item"]}]}]}
    assert state["xref_keyed"] == {"@ref": ["n", {"@t": ["other", {"@b": _b64_oid(zodb.oids["other_keyed"])}]}]}


def test_btree_buckets_and_trees(impl, zodb):
    tree = _state_of(zodb, "oobtree", impl)
    assert list(tree) == ["@children", "@first"]
    children = tree["@children"]
    assert len(children) % 2 == 1 and len(children) >= 21
    bucket_ref = ["BTrees.OOBTree.OOBucket"]
    for i, child in enumerate(children):
        if i % 2 == 0:
            assert list(child) == ["@ref"] and child["@ref"][1:] == bucket_ref
        else:
            assert isinstance(child, str) and child.startswith("k")  # separator keys
    assert tree["@first"] == {"@ref": [zodb.tree_first_bucket.hex(), "BTrees.OOBTree.OOBucket"]}

    # Follow @first and every @next through the latest bucket revisions: the
    # flattened @kv pairs hold exactly the tree's items, in order.
    items = []
    ref = tree["@first"]
    buckets = 0
    while ref is not None:
        oid = bytes.fromhex(ref["@ref"][0])
        rec = impl.decode_zodb_record(zodb.latest["main", oid].data)
        assert rec["@cls"] == ["BTrees.OOBTree", "OOBucket"]
        state = rec["@s"]
        assert set(state) <= {"@kv", "@next"} and "@kv" in state
        items += [(k, tuple(v["@t"]) if isinstance(v, dict) else v) for k, v in state["@kv"]]
        ref = state.get("@next")
        if ref is not None:
            assert list(state) == ["@kv", "@next"] and ref["@ref"][1] == "BTrees.OOBTree.OOBucket"
        buckets += 1
    assert buckets >= 10
    assert items == zodb.tree_items

    assert _state_of(zodb, "small_tree", impl) == {"@kv": [["a", 1], ["b", 2]]}
    assert _state_of(zodb, "empty_tree", impl) is None
    assert _state_of(zodb, "length", impl) == TREE_SIZE


def test_tree_set_and_integer_trees(impl, zodb):
    for name, bucket in (("treeset", "OOSet"), ("iobtree", "IOBucket"), ("iibtree", "IIBucket")):
        tree = _state_of(zodb, name, impl)
        assert list(tree) == ["@children", "@first"], name
        first = tree["@first"]["@ref"]
        assert first[1].endswith("." + bucket)
        state = impl.decode_zodb_record(zodb.latest["main", bytes.fromhex(first[0])].data)["@s"]
        assert list(state) == (["@ks", "@next"] if bucket == "OOSet" else ["@kv", "@next"]), name
    state = impl.decode_zodb_record(zodb.latest["main", bytes.fromhex(
        _state_of(zodb, "iibtree", impl)["@first"]["@ref"][0])].data)["@s"]
    assert state["@kv"][:3] == [[0, 0], [1, -1], [2, -2]]


def test_dict_and_list_subclass_contents_are_in_the_dict_path(impl, zodb):
    state = _state_of(zodb, "subclasses", impl)
    od = state["od"]
    inner = od.get("@reduce", od)
    items = inner.get("items", inner.get("@items"))
    assert items is not None, od
    assert [k for k, _ in items] == ["b", "a", "c", "later"]
    assert items[1][1] == [2, 3]
    assert state["ad"]["@cls"] == ["zodbapp", "AttrDict"]
    assert state["ad"]["@s"] == {"attr": "attribute"}
    assert state["ad"]["@items"] == [["one", 1], ["two", {"@t": [2]}]]
    assert state["al"]["@cls"] == ["zodbapp", "AttrList"]
    assert state["al"]["@appends"] == [1, "two", [3]]
    assert state["al"]["@s"] == {"attr": {"x": 1}}


def test_persistent_mapping_list_and_slots(impl, zodb):
    assert _state_of(zodb, "mapping", impl) == {"data": {
        "k": "v", "n": 1, "nested": {"x": [1, 2]}, "more": {"@t": [1, 2]}}}
    plist = _state_of(zodb, "plist", impl)
    assert plist["data"][:3] == ["a", 1, None]
    assert plist["data"][4] == {"@ref": {"@b": _b64_oid(zodb.oids["keyed"])}}
    assert _state_of(zodb, "slotted", impl) == {"@t": [None, {"a": "slot a", "b": [1, 2]}]}


def test_known_types_in_a_zodb_record(impl, zodb):
    s = _state_of(zodb, "times", impl)
    assert s["utc"] == {"@dt": "2025-01-02T03:04:05+00:00"}
    assert s["plus"] == {"@dt": "2025-01-02T03:04:05+05:30"}
    assert s["minus"] == {"@dt": "2025-01-02T03:04:05-08:00"}
    assert s["seconds"] == {"@dt": "2025-01-02T03:04:05+01:02:03"}
    assert s["pytz_utc"] == {"@dt": "2025-01-02T03:04:05+00:00"}
    assert s["pytz_summer"] == {"@dt": "2025-07-01T12:00:00",
                                "@tz": {"pytz": ["Europe/Vienna", 7200, 3600, "CEST"], "name": "Europe/Vienna"}}
    assert s["day"] == {"@date": "2025-06-15"}
    assert s["clock_us"] == {"@time": "00:00:00.000001"}
    assert s["deltas"][1] == {"@td": [-1, 5, 0]}
    assert [d["@dec"] for d in s["decimals"][:4]] == ["1.10", "-0", "0E-10", "1E+5"]
    assert s["uuids"][0] == {"@uuid": "12345678-1234-5678-1234-567812345678"}
    z = impl.decode_zodb_record(zodb.latest["stdlib", zodb.oids["zones"]].data)["@s"]
    assert z["keyed"] == {"@ref": {"@b": _b64_oid(zodb.oids["keyed"])}}


def test_zoneinfo_datetime_decodes_to_the_reference_marker(impl, zodb):
    # CPython's C zoneinfo pickles ZoneInfo("Europe/Vienna") as
    # getattr(ZoneInfo, "_unpickle")("Europe/Vienna", 1): the cache flag is
    # the int 1 (BININT1), which is also what the reference writes back for
    # {"@tz": {"zoneinfo": key}}.  The Rust codec thus keeps these values
    # intact, and where it is right our output is its output (docs/format.md,
    # "Differences from the Rust codec").
    z = impl.decode_zodb_record(zodb.latest["stdlib", zodb.oids["zones"]].data)["@s"]
    assert z["zone"] == {"@dt": "2025-03-30T02:30:00", "@tz": {"zoneinfo": "Europe/Vienna"}}
    assert z["zone_utc"] == {"@dt": "2025-03-30T00:00:00", "@tz": {"zoneinfo": "UTC"}}
    assert z["clock_zone"] == {"@time": "12:30:00", "@tz": {"zoneinfo": "Europe/Vienna"}}


def test_the_reference_zoneinfo_marker_encodes_what_cpython_pickles(impl):
    # Rows the reference wrote hold {"@dt": ..., "@tz": {"zoneinfo": key}}
    # for CPython's zoneinfo datetimes (cache flag int 1); encoding them must
    # give back those objects (what the Rust codec wrote stays readable), not a variant with True.
    value = datetime.datetime(2025, 3, 30, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Vienna"))
    f = io.BytesIO()
    p = cpython_pickle.Pickler(f, 3)  # CPython's pickle, on PyPy too
    p.dump(("zodbapp", "Item"))  # noqa: the class pickle is irrelevant here
    p.dump({"when": value})
    original = f.getvalue()
    assert re.search(rb"Europe/Vienna(q.)?K\x01\x86", original, re.S)  # the int 1 flag
    encoded = impl.encode_zodb_record({"@cls": ["zodbapp", "Item"], "@s": {
        "when": {"@dt": "2025-03-30T02:30:00", "@tz": {"zoneinfo": "Europe/Vienna"}}}})
    assert _fidelity.same(_fidelity.load_record(original)[1], _fidelity.load_record(encoded)[1])


# CPython's pickle of datetime(2025, 3, 30, 2, 30, tzinfo=ZoneInfo("Europe/Vienna")), protocol 3.
CPYTHON_ZONEINFO_PICKLE = (
    b"\x80\x03cdatetime\ndatetime\nq\x00C\n\x07\xe9\x03\x1e\x02\x1e\x00\x00\x00\x00q\x01"
    b"cbuiltins\ngetattr\nq\x02czoneinfo\nZoneInfo\nq\x03X\t\x00\x00\x00_unpickleq\x04\x86q\x05Rq\x06"
    b"X\r\x00\x00\x00Europe/Viennaq\x07K\x01\x86q\x08Rq\t\x86q\nRq\x0b."
)


def test_the_zoneinfo_pickles_are_what_each_interpreter_writes():
    # The tests above build CPython's pickles with cpython_pickle on every
    # interpreter: it must write exactly what CPython writes, and with
    # bool exactly what the pure-Python zoneinfo (PyPy's) writes.
    import pickle
    import sys

    value = datetime.datetime(2025, 3, 30, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Vienna"))
    pure_python = CPYTHON_ZONEINFO_PICKLE.replace(b"Viennaq\x07K\x01", b"Viennaq\x07\x88")
    assert cpython_pickle.dumps(value) == CPYTHON_ZONEINFO_PICKLE
    assert cpython_pickle.dumps(value, zoneinfo_flag=cpython_pickle.PURE_PYTHON_FLAG) == pure_python
    native = pure_python if sys.implementation.name == "pypy" else CPYTHON_ZONEINFO_PICKLE
    assert pickle.dumps(value, 3) == native
    # ZoneInfo.no_cache: the flag 0 (False)
    nocache = cpython_pickle.dumps(zoneinfo.ZoneInfo.no_cache("UTC"))
    assert nocache.endswith(b"UTCq\x05K\x00\x86q\x06Rq\x07.")


def test_the_pure_python_zoneinfo_pickle_stays_generic_and_loses_nothing(impl, zodb, pg_dsn):
    # PyPy's pure-Python zoneinfo pickles the cache flag as True (NEWTRUE),
    # not the int 1 the marker {"@tz": {"zoneinfo": key}} writes back: the
    # codec keeps that call in the generic form, True included, and the
    # record comes back as it was through both paths (nothing is lost).
    data = zodb.latest["stdlib", zodb.oids["zones_pure_python"]].data
    assert b"K\x01\x86" not in data and re.search(rb"Europe/Vienna(q.)?\x88\x86", data, re.S)
    z = impl.decode_zodb_record(data)["@s"]
    zone = {"@reduce": {
        "callable": {"@reduce": {"callable": {"@cls": ["builtins", "getattr"]},
                                 "args": {"@t": [{"@cls": ["zoneinfo", "ZoneInfo"]}, "_unpickle"]}}},
        "args": {"@t": ["Europe/Vienna", True]}}}
    when = base64.b64encode(b"\x07\xe9\x03\x1e\x02\x1e\x00\x00\x00\x00").decode()  # 2025-03-30 02:30
    want = {"@reduce": {"callable": {"@cls": ["datetime", "datetime"]}, "args": {"@t": [{"@b": when}, zone]}}}
    assert json.dumps(z["zone"]) == json.dumps(want)  # json tells True from 1
    for name in ("zone", "zone_utc", "zone_fold", "clock_zone", "zones"):
        assert "@tz" not in json.dumps(z[name]), name  # no {"@tz": {"zoneinfo": key}} anywhere
    again = impl.encode_zodb_record(impl.decode_zodb_record(data))
    assert _fidelity.same(_fidelity.load_record(data), _fidelity.load_record(again))
    again = record_after_jsonb(impl, data, pg_dsn)
    assert _fidelity.same(_fidelity.load_record(data), _fidelity.load_record(again))
    # The comparison sees the flag: the CPython form of the same record differs.
    cpython_form = zodb.latest["stdlib", zodb.oids["zones"]].data
    assert not _fidelity.same(_fidelity.load_record(data), _fidelity.load_record(cpython_form))
    # Single pickles: pickle_to_dict / pickle_to_json and back.
    single = cpython_pickle.dumps(_zoneinfo_values(), zoneinfo_flag=cpython_pickle.PURE_PYTHON_FLAG)
    for there, back in ((impl.pickle_to_dict, impl.dict_to_pickle), (impl.pickle_to_json, impl.json_to_pickle)):
        again = back(there(single))
        assert _fidelity.same(_fidelity.Loader(io.BytesIO(single)).load(), _fidelity.Loader(io.BytesIO(again)).load())


def test_floats_and_strings_in_the_postgresql_json(impl, zodb, pg_dsn):
    _, _, text, _ = impl.decode_zodb_record_for_pg_json(zodb.latest["main", zodb.oids["scalars"]].data)
    (stored,) = [json.loads(t) for t in jsonb_texts(pg_dsn, [text])]
    assert stored["nan"] == {"@f": "nan"}
    assert stored["inf"] == {"@f": "inf"} and stored["neg_inf"] == {"@f": "-inf"}
    assert stored["neg_zero"] == {"@f": "-0.0"}
    assert type(stored["big_float"]) is float and stored["big_float"] == 1e16
    assert stored["small_float"] == 1e-7
    assert stored["s_nul"] == {"@ns": base64.b64encode(b"a\x00b").decode()}
    assert "@su" in stored["s_surrogate"]
    assert stored["s_non_ascii"] == "héllo wörld ✓ 😀 中文 Ωμέγα"
    assert stored["ints"][15] == {"@bi": str(2**64)}
    assert math.isnan(impl.decode_zodb_record(zodb.latest["main", zodb.oids["scalars"]].data)["@s"]["nan"])
