"""The codec's promises on every record of the public and wikipedia corpora, for each twin.

1. nothing lost on each path a storage takes (helpers.PATHS): decode ->
   encode gives the same objects, for the two PostgreSQL paths after a real
   jsonb column;
2/3. same output as the reference codec wherever the reference kept the
   record intact (dict, class names, PG JSON text; refs contain its refs);
and refs contain every oid ZODB's own referencesf finds.
"""

from __future__ import annotations

import json

import pytest
from ZODB.serialize import referencesf
from ZODB.utils import u64

import helpers
from corpus import NAMES, VERSIONS, faithful, row_record, vectors
from helpers import PATHS, records_back, same_records
from zodb_json_codec._db import fidelity as _fidelity

pytestmark = pytest.mark.slow  # every corpus record on every path

# Records whose original bytes the object-graph comparison itself cannot load:
# both were assembled from two separately pickled protocol 4/5 pickles, so
# with the memo ZODB shares between a record's two pickles, the state's memo
# references point at the wrong objects (and the protocol 5 one rebuilds a
# ZoneInfo through builtins.getattr, which the comparison does not call).
# ZODB cannot load them either.  Checked below, not skipped silently.
UNLOADABLE = {("public", "00000000000f462b"), ("public", "00000000000f462c")}

# Records ZODB's referencesf cannot scan: Python 2 str that is not ASCII
# (zodbpickle reads them as ASCII text) and protocols its noload refuses.
ZODB_CANNOT_SCAN = UNLOADABLE | {("public", "00000000000f4628"), ("public", "00000000000f462a")}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NAMES)
def test_same_as_reference_where_the_reference_is_right(impl, name, version):
    """Where a release of the Rust codec keeps a record intact, our output is its output: 1.7.0's, and
    1.6.1's wherever 1.7.0 wrote the same (test_rust_compat checks the records 1.7.0 changed)."""
    rows = faithful(name, version)
    assert rows, "the corpus copy lost its faithful rows"
    newest = {(row["oid"], row["tid"]): row for row in vectors(name, VERSIONS[-1])}
    for row in rows:
        latest = newest[row["oid"], row["tid"]]
        if (row["dict"], row["pg_json"]) != (latest["dict"], latest["pg_json"]):
            continue
        data = row_record(row)
        mine = impl.decode_zodb_record(data)
        assert json.dumps(mine, ensure_ascii=False) == row["dict"], row["oid"]
        module, cls, state_json, refs = impl.decode_zodb_record_for_pg_json(data)
        ref_module, ref_cls, ref_json, ref_refs = row["pg_json"]
        assert (module, cls) == (ref_module, ref_cls), row["oid"]
        assert state_json == ref_json, row["oid"]
        assert set(ref_refs) <= set(refs), row["oid"]
        assert type(refs) is list and all(type(r) is int for r in refs)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", NAMES)
def test_nothing_lost(impl, name, path, kept_by):
    """decode -> keep -> encode gives the same objects; the JSON of the pg paths through a real jsonb column."""
    rows = vectors(name)
    data = [row_record(row) for row in rows]
    again = records_back(impl, data, path, kept_by)
    lost = []
    for row, original, back in zip(rows, data, again):
        if (name, row["oid"]) in UNLOADABLE:
            with pytest.raises(Exception):
                _fidelity.load_record(original)
            continue
        if not same_records(original, back):
            lost.append(row["oid"])
    assert lost == []


def test_pg_dict_variant_is_the_json_text_but_for_big_floats(impl):
    data = helpers.record({"a": 1e16, "b": [-1e300], "c": 1.5, "d": float("nan")})
    _, _, state, _ = impl.decode_zodb_record_for_pg(data)
    _, _, text, _ = impl.decode_zodb_record_for_pg_json(data)
    assert state == {"a": {"@f": "1e+16"}, "b": [{"@f": "-1e+300"}], "c": 1.5, "d": {"@f": "nan"}}
    assert text.startswith('{"a":10000000000000000.0,"b":[-1000000000000000')
    assert json.loads(text)["c"] == 1.5 and json.loads(text)["d"] == {"@f": "nan"}


@pytest.mark.parametrize("name", NAMES)
def test_refs_contain_every_oid_zodb_finds(impl, name):
    for row in vectors(name):
        data = row_record(row)
        module, cls, _, refs = impl.decode_zodb_record_for_pg(data)
        assert (module, cls, refs) == tuple(impl.decode_zodb_record_for_pg_json(data)[i] for i in (0, 1, 3))
        try:
            want = {u64(oid) for oid in referencesf(data)}
        except Exception:  # ZODB itself cannot read this record
            assert (name, row["oid"]) in ZODB_CANNOT_SCAN
            continue
        assert want <= set(refs), row["oid"]


@pytest.mark.parametrize("name", NAMES)
def test_reencoding_is_idempotent(impl, name):
    for row in vectors(name):
        once = impl.encode_zodb_record(impl.decode_zodb_record(row_record(row)))
        twice = impl.encode_zodb_record(impl.decode_zodb_record(once))
        assert once == twice, row["oid"]


def test_the_corpus_copy_is_complete():
    assert len(vectors("public")) == 488
    assert len(vectors("wikipedia")) == 1692
    assert len(faithful("public", "1.6.1")) == 454
    assert len(faithful("public", "1.7.0")) == 477
