"""The corpora copied into tests/data: reference vectors and FileStorages.

``vectors(name)`` gives the Rust codec's outputs for every record of a
corpus ("public" or "wikipedia"), made by scripts/slim_vectors.py: dicts
with oid, tid, record (base64), dict (json.dumps of the reference's
decode_zodb_record), pg_json ([module, name, state_json, refs] of its
decode_zodb_record_for_pg_json) and the labels lossless / pg_lossless (did
the reference keep the record intact, through encode_zodb_record, and
through PostgreSQL jsonb).  ``row_record(row)`` gives a row's record bytes,
``records(name)`` (oid hex, record bytes) of every row.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import shutil
from pathlib import Path
from typing import Iterator, List, Tuple

DATA = Path(__file__).resolve().parent / "data"
NAMES = ("public", "wikipedia")


@functools.lru_cache(maxsize=None)
def vectors(name: str) -> Tuple[dict, ...]:
    """Every row of the corpus, in storage order (cached: do not mutate)."""
    with gzip.open(DATA / f"{name}.vectors.jsonl.gz", "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


def row_record(row: dict) -> bytes:
    """The record bytes of a corpus row."""
    return base64.b64decode(row["record"])


def records(name: str) -> Iterator[Tuple[str, bytes]]:
    """(oid hex, record bytes) of every record revision of the corpus."""
    for row in vectors(name):
        yield row["oid"], row_record(row)


def faithful(name: str) -> List[dict]:
    """The rows the reference keeps intact in both paths: ours must match them exactly."""
    return [row for row in vectors(name) if row["lossless"] and row["pg_lossless"]]


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
