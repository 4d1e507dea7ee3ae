"""Record what a release of the Rust codec makes of every record of a set, for the tests.

    python scripts/rust_vectors.py --rust SO --version 1.7.0 [--dsn DSN] [SET ...]

SO is the Rust codec's extension module (``zodb_json_codec/_rust*.so``
from its wheel: ``pip download zodb-json-codec==1.7.0`` on CPython 3.12 or
3.13, ``==1.6.1`` on 3.9-3.11); it is loaded under another name, so this
package and the Rust codec run in one process.  Run it with a Python of the
wheel's version that has this package, ZODB and psycopg installed.

SET is ``public``, ``wikipedia`` (the FileStorages in tests/data),
``plone`` (tests/data/plone.records.jsonl.gz, records of a real Plone 6
site) or ``shapes`` (tests/rustshapes.py: a record of each shape the Rust
codec's releases changed); all of them by default.  Each set gets
``tests/data/<set>.vectors-<version>.jsonl.gz``, one compact JSON line per
record revision, in storage order:

  oid, tid     hex; for ``shapes`` the shape's name is in ``oid``
  record       base64 of the record (only in the 1.6.1 files: the other
               versions' lines are aligned with them)
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
#: The release whose files also hold the records.
RECORDS_VERSION = "1.6.1"


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
    """(oid hex or shape name, tid hex, record) of every record revision of a set, in storage order."""
    if name == "shapes":
        sys.path.insert(0, str(ROOT / "tests"))
        import rustshapes

        for shape, record in rustshapes.shapes():
            yield shape, "", record
    elif name == "plone":
        with gzip.open(DATA / "plone.records.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield row["oid"], row["tid"], base64.b64decode(row["record"])
    else:
        import tempfile

        from ZODB.FileStorage import FileStorage

        with tempfile.TemporaryDirectory() as tmp:
            sys.path.insert(0, str(ROOT / "tests"))
            import corpus

            fs = FileStorage(str(corpus.storage_path(name, Path(tmp))), read_only=True)
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
    ap.add_argument("--version", required=True, help="its release, e.g. 1.7.0 (names the output files)")
    ap.add_argument("--dsn", help="a PostgreSQL database for the jsonb round trip of pg_lossless")
    ap.add_argument("sets", nargs="*", metavar="SET", help=f"of {', '.join(SETS)} (default: all)")
    args = ap.parse_args()
    unknown = set(args.sets) - set(SETS)
    if unknown:
        ap.error(f"unknown set {sorted(unknown)[0]!r}: choose from {', '.join(SETS)}")
    rust = load_rust(args.rust)
    jsonb = Jsonb(args.dsn)
    for name in args.sets or SETS:
        rows = []
        for oid, tid, record in set_records(name):
            row = {"oid": oid, "tid": tid}
            if args.version == RECORDS_VERSION:
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
