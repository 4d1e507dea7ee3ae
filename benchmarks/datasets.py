"""The records the benchmarks time: ten synthetic shapes and FileStorage scans of the project's corpora."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import gzip
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

#: FileStorages scanned by default, by dataset name; gzipped ones are unpacked once into CACHE.
FS_FILES = {"wikipedia": DATA / "wikipedia.fs.gz", "public": DATA / "public.fs"}
CACHE = Path(tempfile.gettempdir()) / "zodb-json-codec-bench"


# record(), deep() and synthetic() are copied verbatim from shared/tools/compare.py, so the
# numbers compare with the ones the Rust codec publishes for the same shapes.
def record(module, name, state):
    return pickle.dumps((module, name), 3) + pickle.dumps(state, 3)


def deep(depth):
    if depth == 0:
        return {"leaf": True, "value": 42}
    return {"level": depth, "child": deep(depth - 1), "siblings": list(range(5))}


def synthetic():
    """The same ten shapes the reference codec publishes numbers for."""
    return {
        "simple_flat_dict": record("app", "Doc", {"title": "Hello World", "count": 42, "active": True,
                                                  "ratio": 3.14159}),
        "nested_dict": record("app", "Box", {"metadata": {"created": "2025-01-01", "author": "admin"},
                                             "items": [1, 2, 3], "config": {"nested": {"deep": True}}}),
        "large_flat_dict": record("app", "Big", {
            f"field_{i:03d}": (f"value_{i}" if i % 3 == 0 else i if i % 3 == 1 else i * 0.1)
            for i in range(100)}),
        "bytes_in_state": record("app", "Blob", {"data": b"\x00\x01\x02" * 333, "name": "test-blob"}),
        "special_types": record("app", "Typed", {
            "created": dt.datetime(2025, 6, 15, 12), "birthday": dt.date(1990, 5, 20),
            "duration": dt.timedelta(days=7, seconds=3600), "price": decimal.Decimal("99.99"),
            "tags": {"python", "rust", "zodb"}}),
        "btree_small": record("BTrees.OOBTree", "OOBTree",
                              (((("alpha", 1, "beta", 2, "gamma", 3, "delta", 4),),),)),
        "btree_length": record("BTrees.Length", "Length", 42),
        "scalar_string": record("app", "Str", "just a plain string as state"),
        "wide_dict": record("app", "Wide", {f"k{i}": f"v{i}" for i in range(1000)}),
        "deep_nesting": record("app", "Deep", deep(10)),
    }


SYNTHETIC_NAMES = tuple(synthetic())
FS_NAMES = tuple(FS_FILES)
NAMES = SYNTHETIC_NAMES + FS_NAMES


def storage_path(name: str) -> Path:
    """A readable FileStorage path for a default scan, gunzipping into CACHE when needed."""
    source = FS_FILES[name]
    if source.suffix != ".gz":
        return source
    target = CACHE / source.stem
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        CACHE.mkdir(parents=True, exist_ok=True)
        # Unpack beside the target and rename, so a concurrent run never reads half a file.
        fd, partial = tempfile.mkstemp(dir=CACHE, prefix=source.stem, suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as dst, gzip.open(source, "rb") as src:
                shutil.copyfileobj(src, dst)
            os.chmod(partial, 0o644)  # mkstemp's 0600 would lock other users out of a shared cache
            os.replace(partial, target)
        except BaseException:
            os.unlink(partial)
            raise
    return target


def fs_records(path, limit: Optional[int] = None) -> List[bytes]:
    """Every non-empty data record of a FileStorage, in storage order (as compare.py reads them)."""
    from ZODB.FileStorage import FileStorage  # heavy: only when a scan is asked for

    fs = FileStorage(str(path), read_only=True)
    try:
        out = [rec.data for txn in fs.iterator() for rec in txn if rec.data]
    finally:
        fs.close()
    return out[:limit] if limit else out


@functools.lru_cache(maxsize=None)
def _synthetic_records() -> Dict[str, bytes]:
    return synthetic()


@functools.lru_cache(maxsize=None)
def load(name: str) -> List[bytes]:
    """The records of one dataset by name (cached: do not mutate); a synthetic shape is one record."""
    if name in FS_FILES:
        return fs_records(storage_path(name))
    return [_synthetic_records()[name]]
