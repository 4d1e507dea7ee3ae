"""Record what a release of the Rust codec makes of every record of a set, for the tests.

    python scripts/rust_vectors.py --rust SO --version 1.7.0 [--dsn DSN] [SET ...]

SO is the Rust codec's extension module (``zodb_json_codec/_rust*.so``
from its wheel: ``pip download zodb-json-codec==1.7.0`` on CPython 3.12 or
3.13, ``==1.6.1`` on 3.9-3.11); it is loaded under another name, so this
package and the Rust codec run in one process.  Run it with a Python of the
wheel's version that has this package, ZODB and psycopg installed.

SET is ``public``, ``wikipedia``, ``plone`` (the FileStorages in tests/data;
plone's is a packed Plone 6 site that scripts/make-plone-site built) or
``shapes`` (tests/rustshapes.py: a record of each shape the Rust codec's
releases changed); all of them by default.  Each set gets
``tests/data/<set>.vectors-<version>.jsonl.gz``, one compact JSON line per
record revision, in storage order:

  oid, tid     hex; for ``shapes`` the shape's name is in ``oid``
  record       base64 of the record (only for ``shapes``: the other sets'
               records are their FileStorages', in the same order)
  dict         json.dumps of the codec's ``decode_zodb_record``, or null
  pg_json      ``[module, name, state_json, refs]`` of its
               ``decode_zodb_record_for_pg_json``, or null
  error        "Type: message" where ``decode_zodb_record`` raised
  lossless     the codec's own ``encode_zodb_record`` of its dict loads to
               the same objects as the record (``_db.fidelity``)
  pg_lossless  the same for its JSON text through a PostgreSQL ``jsonb``
               column (``--dsn``; without one, through ``json.loads``)

The output is reproducible byte for byte (gzip mtime 0) for the same codec,
records and database.

    python scripts/rust_vectors.py --rust SO --compare [--dsn DSN] SET|PATH.fs ...

compares instead, writing nothing: for each set (or any FileStorage), how
many records the release decodes and keeps intact, on how many of those this
codec's twins write the same dict and the same JSON text, and how many of the
release's JSONs (the dict, and the text after a jsonb column) this codec's
encoders turn back into the record's objects, and how many they refuse.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SETS = ("public", "wikipedia", "plone", "shapes")
#: The set whose files also hold the records (the others are FileStorages in tests/data).
RECORDS_IN_VECTORS = ("shapes",)


def load_rust(path: str) -> Any:
    """The Rust codec's extension, imported under a name that cannot clash with this package."""
    spec = importlib.util.spec_from_file_location("refcodec._rust", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"not an extension module: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vector_path(name: str, version: str) -> Path:
    return DATA / f"{name}.vectors-{version}.jsonl.gz"


def set_records(name: str) -> Iterator[Tuple[str, str, bytes]]:
    """(oid hex or shape name, tid hex, record) of every record revision of a set (or of the FileStorage at a
    path ending in .fs), in storage order."""
    if name.endswith(".fs"):
        yield from _storage_records(Path(name))
    elif name == "shapes":
        sys.path.insert(0, str(ROOT / "tests"))
        import rustshapes

        for shape, record in rustshapes.shapes():
            yield shape, "", record
    else:
        import tempfile

        sys.path.insert(0, str(ROOT / "tests"))
        import corpus

        with tempfile.TemporaryDirectory() as tmp:
            yield from _storage_records(corpus.storage_path(name, Path(tmp)))


def _storage_records(path: Path) -> Iterator[Tuple[str, str, bytes]]:
    from ZODB.FileStorage import FileStorage

    fs = FileStorage(str(path), read_only=True)
    try:
        for txn in fs.iterator():
            for rec in txn:
                if rec.data:
                    yield rec.oid.hex(), rec.tid.hex(), rec.data
    finally:
        fs.close()


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Jsonb:
    """JSON texts through a real jsonb column, as a storage keeps them."""

    def __init__(self, dsn: Optional[str]) -> None:
        self.conn = None
        if dsn:
            import psycopg

            self.conn = psycopg.connect(dsn, autocommit=True)

    def __call__(self, text: str) -> str:
        if self.conn is None:
            return text
        with self.conn.cursor() as cur:
            cur.execute("SELECT %s::jsonb::text", (text,))
            row = cur.fetchone()
            assert row is not None
            return str(row[0])


def describe(rust: Any, record: bytes, jsonb: Jsonb) -> dict:
    """The codec's outputs for one record, and whether its own encoder gives the objects back."""
    from zodb_json_codec._db import fidelity

    def same(again: bytes) -> bool:
        try:
            return fidelity.same(fidelity.load_record(record, as_written=True), fidelity.load_record(again))
        except Exception:  # noqa: BLE001 - a record that does not load is not the same
            return False

    out: dict = {"dict": None, "pg_json": None}
    try:
        decoded = rust.decode_zodb_record(record)
        out["dict"] = json.dumps(decoded, ensure_ascii=False)
    except Exception as exc:  # noqa: BLE001 - recording every failure is the point
        out["error"] = _error(exc)
        decoded = None
    try:
        module, name, text, refs = rust.decode_zodb_record_for_pg_json(record)
        out["pg_json"] = [module, name, text, list(refs)]
    except Exception as exc:  # noqa: BLE001
        out["pg_json_error"] = _error(exc)
    out["lossless"] = False
    if decoded is not None:
        try:
            out["lossless"] = same(rust.encode_zodb_record(json.loads(out["dict"])))
        except Exception:  # noqa: BLE001
            pass
    out["pg_lossless"] = False
    if out["pg_json"] is not None:
        module, name, text, _ = out["pg_json"]
        try:
            state = json.loads(jsonb(text))
            out["pg_lossless"] = same(rust.encode_zodb_record({"@cls": [module, name], "@s": state}))
        except Exception:  # noqa: BLE001
            pass
    return out


def compare(rust: Any, name: str, jsonb: Jsonb) -> None:
    """Print how this codec's twins compare with the release on every record of a set."""
    import collections

    from zodb_json_codec import _impl
    from zodb_json_codec._db import fidelity

    twins = {}
    for twin in ("python", "cython"):
        try:
            twins[twin] = _impl.import_twin(twin)
        except ImportError:
            print(f"{twin} twin: not built")
    counts: collections.Counter = collections.Counter()
    for _, _, record in set_records(name):
        row = describe(rust, record, jsonb)
        counts["records"] += 1
        if row["dict"] is None:
            continue
        counts["decoded by the release"] += 1
        kept = row["lossless"] and row["pg_lossless"]
        counts["kept intact by the release"] += kept
        original = fidelity.load_record(record, as_written=True)
        stored = {"dict": json.loads(row["dict"])}
        if row["pg_json"] is not None:
            module, cls, text, _ = row["pg_json"]
            stored["pg_json"] = (module, cls, jsonb(text))
        for twin, (decoder, encoder) in twins.items():
            if kept:
                same_dict = json.dumps(decoder.decode_zodb_record(record), ensure_ascii=False) == row["dict"]
                ours = list(decoder.decode_zodb_record_for_pg_json(record))
                same_text = ours[:3] == row["pg_json"][:3] and set(row["pg_json"][3]) <= set(ours[3])
                counts[f"{twin}: same dict (of kept)"] += same_dict
                counts[f"{twin}: same JSON text (of kept)"] += same_text
            for path, value in stored.items():
                try:
                    if path == "dict":
                        again = encoder.encode_zodb_record(value)
                    else:
                        again = encoder.encode_zodb_record_from_pg_json(*value)
                except ValueError:
                    counts[f"{twin}: {path} refused"] += 1
                    continue
                try:
                    same = fidelity.same(original, fidelity.load_record(again))
                except Exception:  # noqa: BLE001 - a record that does not load is not the same
                    same = False
                counts[f"{twin}: {path} read back" if same else f"{twin}: {path} different"] += 1
    print(name)
    for key, n in counts.items():
        print(f"  {key}: {n}")


def write(target: Path, rows: List[dict]) -> None:
    tmp = target.with_suffix(".tmp")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            for row in rows:
                gz.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
    tmp.replace(target)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rust", required=True, metavar="SO", help="the Rust codec's _rust*.so")
    ap.add_argument("--version", help="its release, e.g. 1.7.0 (names the output files)")
    ap.add_argument("--dsn", help="a PostgreSQL database for the jsonb round trip of pg_lossless")
    ap.add_argument("--compare", action="store_true", help="compare with this codec, write nothing")
    ap.add_argument("sets", nargs="*", metavar="SET", help=f"of {', '.join(SETS)} (default: all)")
    args = ap.parse_args()
    unknown = {name for name in args.sets if name not in SETS and not (args.compare and name.endswith(".fs"))}
    if unknown:
        ap.error(f"unknown set {sorted(unknown)[0]!r}: choose from {', '.join(SETS)}")
    rust = load_rust(args.rust)
    jsonb = Jsonb(args.dsn)
    if not args.compare and not args.version:
        ap.error("--version is needed to write vectors")
    if args.compare:
        for name in args.sets or SETS:
            compare(rust, name, jsonb)
        return
    for name in args.sets or SETS:
        rows = []
        for oid, tid, record in set_records(name):
            row = {"oid": oid, "tid": tid}
            if name in RECORDS_IN_VECTORS:
                row["record"] = base64.b64encode(record).decode("ascii")
            row.update(describe(rust, record, jsonb))
            rows.append(row)
        target = vector_path(name, args.version)
        write(target, rows)
        print(f"{target.relative_to(ROOT)}: {len(rows)} records, {sum(r['dict'] is not None for r in rows)} "
              f"decoded, {sum(r['lossless'] for r in rows)} lossless, {sum(r['pg_lossless'] for r in rows)} "
              f"pg_lossless, {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
