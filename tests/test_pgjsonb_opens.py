"""zodb-pgjsonb opens what pg-export writes: every object, every blob and the undo log, as the original has them.

zodb-pgjsonb (a ZODB storage on PostgreSQL, which calls this codec) installs
on CPython 3.12 and later, so the test extra brings it to CI's 3.12 tier
(tests/README.md); elsewhere this module is skipped.  The database is
test_whole_copies' (blobs in several revisions, transaction metadata, an
undone creation, a deletion, a pack).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import cli, fresh_database
from test_whole_copies import DELETED, UNDONE, oid, ok, site  # noqa: F401 - site: the fixture

if (3, 12) <= sys.version_info < (3, 14):  # where the test extra installs it: a failure to import fails
    import zodb_pgjsonb  # noqa: F401
else:
    pytest.importorskip("zodb_pgjsonb", reason="zodb-pgjsonb installs on CPython 3.12 and later")

import zodb_json_codec as codec
from ZODB.FileStorage import FileStorage
from ZODB.POSException import POSKeyError
from ZODB.utils import p64


def _objects(storage) -> dict:
    """Each current object's (tid, decoded state) and blob bytes, of a FileStorage."""
    found = {}
    for number in range(0, 64):
        try:
            data, tid = storage.load(p64(number))
        except POSKeyError:
            continue
        found[number] = tid, codec.decode_zodb_record(data)
    return found


@pytest.mark.parametrize("history_preserving", [False, True])
def test_pgjsonb_serves_the_export(site, tmp_path: Path, pg_dsn: str, history_preserving: bool):  # noqa: F811
    import transaction
    from ZODB import DB
    from zodb_pgjsonb.storage import PGJsonbStorage

    dsn = fresh_database(pg_dsn, f"opened_{int(history_preserving)}")
    ok("pg-export", str(site["path"]), "--dsn", dsn, "--blob-dir", str(site["blobs"]),
       *(["--all"] if history_preserving else []))
    original = FileStorage(str(site["path"]), blob_dir=str(site["blobs"]), read_only=True)
    storage = PGJsonbStorage(dsn, history_preserving=history_preserving, blob_temp_dir=str(tmp_path / "tmp"),
                             cache_warm_pct=0)
    try:
        want = _objects(original)
        assert want and UNDONE not in want and DELETED not in want
        for number, (tid, state) in want.items():
            data, got_tid = storage.load(p64(number))
            assert (got_tid, codec.decode_zodb_record(data)) == (tid, state), number
            if state["@cls"] == ["ZODB.blob", "Blob"]:
                with open(storage.loadBlob(p64(number), tid), "rb") as got, \
                        open(original.loadBlob(p64(number), tid), "rb") as expected:
                    assert got.read() == expected.read()
        for number in (UNDONE, DELETED):
            with pytest.raises(POSKeyError):
                storage.load(oid(number))
        if history_preserving:
            def log(source):
                return [(e["user_name"], e["description"], e.get("request_path"), e.get("reason"))
                        for e in source.undoLog(0, 100)]
            # FileStorage's undo log ends where a pack went through; zodb-pgjsonb's lists those too.
            packed = [(t.user, t.description, t.extension.get("request_path"), t.extension.get("reason"))
                      for t in original.iterator() if t.status == "p"]
            kept = log(original)
            assert packed and log(storage) == kept + packed[::-1]
            blob = oid(1)  # the image: each revision's bytes, as the pack kept them
            for entry in original.history(blob, size=10):
                with open(storage.loadBlob(blob, entry["tid"]), "rb") as got, \
                        open(original.loadBlob(blob, entry["tid"]), "rb") as expected:
                    assert got.read() == expected.read()
        # Through ZODB, as an application reads it, and a write on top: the sequence and trigger are there.
        db = DB(storage)
        try:
            conn = db.open()
            root = conn.root()
            with root["image"].open("r") as f:
                assert len(f.read()) == (1 << 20) + 3
            root["folder"]["note"] = "written after the copy"
            transaction.commit()
            conn.close()
        finally:
            db.close()
    finally:
        original.close()


def test_pg_import_reads_what_pgjsonb_wrote_itself(site, tmp_path: Path, pg_dsn: str):  # noqa: F811
    # zodb-pgjsonb's own migration (copyTransactionsFrom into a history-preserving PGJsonbStorage), read back
    # by pg-import: every revision, transaction and blob, as verify --against --all sees them.
    from zodb_pgjsonb.storage import PGJsonbStorage

    dsn = fresh_database(pg_dsn, "written_by_pgjsonb")
    original = FileStorage(str(site["path"]), blob_dir=str(site["blobs"]), read_only=True)
    storage = PGJsonbStorage(dsn, history_preserving=True, blob_temp_dir=str(tmp_path / "tmp"), cache_warm_pct=0)
    try:
        storage.copyTransactionsFrom(original)
    finally:
        storage.close()
        original.close()
    copy, blobs = tmp_path / "copy.fs", tmp_path / "copy-blobs"
    ok("pg-import", str(copy), "--dsn", dsn, "--blob-dir", str(blobs))
    proc = cli("verify", str(copy), "--against", str(site["path"]), "--all", "--blob-dir", str(blobs),
               "--original-blob-dir", str(site["blobs"]))
    # All of it but what zodb-pgjsonb's migration leaves out itself: it skips revisions without data (the
    # undone creation and the deletion: in zodb-pgjsonb the draft is back) and keeps no pack mark (status).
    assert proc.returncode == 1, proc.out + proc.err
    assert "12 same, 0 different, 0 not in the original, 2 missing; 9 transactions compared: 2 different, " \
        "0 missing; 4 blob files same, 0 different" in proc.out, proc.out
    problems = sorted(line.split(": ", 1)[1] for line in proc.err.splitlines() if line.strip())
    assert problems == ["metadata: differs from the original's: status"] * 2 + [
        "missing: the original's revision without data is not in the copy"] * 2, proc.err
    assert [line.split()[1] for line in proc.err.splitlines() if "revision without data" in line] == [
        oid(UNDONE).hex(), oid(DELETED).hex()]
