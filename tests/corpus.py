"""The record sets copied into tests/data: the FileStorages and the Rust codec's vectors.

``vectors(name, version)`` gives what a release of the Rust codec made of
every record of a set, in storage order (scripts/rust_vectors.py wrote
them): dicts with oid, tid, record (base64), dict (json.dumps of its
decode_zodb_record, or None), pg_json ([module, name, state_json, refs]
of its decode_zodb_record_for_pg_json, or None) and the labels lossless /
pg_lossless (did its own encoder give the record's objects back, directly
and through a PostgreSQL jsonb column).  ``NAMES`` are the FileStorages
the suite reads whole everywhere (``storage_path``); ``SETS`` adds
``plone``, a packed Plone 6 site (scripts/make-plone-site: 17,857
records, read by the modules about the Rust codec and the corpora), and
``shapes``, a record of each shape the Rust codec's releases changed
(tests/rustshapes.py; its records are in its vector files).
``row_record(row)`` gives a row's record bytes, ``records(name)`` (oid hex,
record bytes) of every row.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, List, Tuple

DATA = Path(__file__).resolve().parent / "data"
NAMES = ("public", "wikipedia")
SETS = NAMES + ("plone", "shapes")
#: The Rust codec's releases with vectors.
VERSIONS = ("1.6.1", "1.7.0")


@functools.lru_cache(maxsize=None)
def vectors(name: str, version: str = VERSIONS[0]) -> Tuple[dict, ...]:
    """Every row of a set for a release, in storage order, with its record (cached: do not mutate)."""
    with gzip.open(DATA / f"{name}.vectors-{version}.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = tuple(json.loads(line) for line in f)
    if name != "shapes":
        stored = _storage_records(name)
        assert [(r["oid"], r["tid"]) for r in rows] == [(oid, tid) for oid, tid, _ in stored], name
        for row, (_, _, data) in zip(rows, stored):
            row["record"] = base64.b64encode(data).decode("ascii")
    return rows


@functools.lru_cache(maxsize=None)
def _storage_records(name: str) -> Tuple[Tuple[str, str, bytes], ...]:
    """(oid hex, tid hex, record) of every record with data of a set's FileStorage, in storage order."""
    from ZODB.FileStorage import FileStorage

    with tempfile.TemporaryDirectory() as tmp:
        fs = FileStorage(str(storage_path(name, Path(tmp))), read_only=True)
        try:
            return tuple((rec.oid.hex(), rec.tid.hex(), rec.data)
                         for txn in fs.iterator() for rec in txn if rec.data)
        finally:
            fs.close()


def row_record(row: dict) -> bytes:
    """The record bytes of a corpus row."""
    return base64.b64decode(row["record"])


def records(name: str) -> Iterator[Tuple[str, bytes]]:
    """(oid hex, record bytes) of every record revision of the corpus."""
    for row in vectors(name):
        yield row["oid"], row_record(row)


def faithful(name: str, version: str = VERSIONS[0]) -> List[dict]:
    """The rows a release keeps intact in both paths."""
    return [row for row in vectors(name, version) if row["lossless"] and row["pg_lossless"]]


def storage_path(name: str, directory: Path) -> Path:
    """A path to the corpus's FileStorage; gzipped ones are unpacked into directory."""
    plain = DATA / f"{name}.fs"
    if plain.exists():
        return plain
    target = Path(directory) / f"{name}.fs"
    if not target.exists():
        with gzip.open(DATA / f"{name}.fs.gz", "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return target
