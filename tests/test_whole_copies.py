"""Whole databases, nothing lost: blobs, transaction metadata and revisions without data through dump and load.

A database written by ZODB here: blobs of several MB in several revisions,
transactions with a user, a description and an extension, an undone
creation, a deleted object, and a pack.  Each copy is checked by ``verify
--against`` and, independently, through ZODB: the blob bytes, the undo log
and which oids exist.  Each loss the command line used to have (blobs
dropped, metadata dropped, undone creations back to life) is a test here.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, List

import pytest

from helpers import cli, fresh_database
from test_db_commands import ok, refused  # the one-line refusal checked as there

from ZODB.FileStorage import FileStorage

pytestmark = pytest.mark.slow  # ZODB databases with megabytes of blobs through the command line

UNDONE = 4   # the oid whose creation is undone
DELETED = 5  # the oid deleted with deleteObject


def oid(n: int) -> bytes:
    return n.to_bytes(8, "big")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Dict[str, Path]:
    import transaction
    from persistent.mapping import PersistentMapping
    from ZODB import DB
    from ZODB.blob import Blob
    from ZODB.Connection import TransactionMetaData

    directory = tmp_path_factory.mktemp("site")
    path, blobs = directory / "Data.fs", directory / "blobstorage"
    storage = FileStorage(str(path), blob_dir=str(blobs))
    db = DB(storage)
    conn = db.open()
    root = conn.root()
    txn = transaction.get()
    txn.setUser("alice", "/acl_users")
    txn.note("Added two files")
    txn.setExtendedInfo("request_path", "/site/++add++File")
    root["image"], root["file"] = Blob(), Blob()
    with root["image"].open("w") as f:
        f.write(os.urandom(3 << 20))
    with root["file"].open("w") as f:
        f.write(b"first version\n" * 1000)
    root["folder"] = PersistentMapping(title="Folder")
    transaction.commit()
    for version in range(4):  # the image rewritten, a pack after the first two: three more blob revisions kept
        if version == 2:
            time.sleep(0.01)
            db.pack(time.time())
        txn = transaction.get()
        txn.setUser("bob")
        txn.note(f"Edited the image ({version}) – ünïcode")
        with root["image"].open("w") as f:
            f.write(os.urandom((1 << 20) + version))
        transaction.commit()
    root["draft"] = draft = PersistentMapping(title="Draft")  # oid 4: its creation undone below
    transaction.get().note("Added a draft")
    transaction.commit()
    assert draft._p_oid == oid(UNDONE)
    db.undo(db.undoLog(0, 1)[0]["id"])
    transaction.get().note("Undo: Added a draft")
    transaction.commit()
    root["old"] = PersistentMapping(title="Old")  # oid 5: deleted below
    transaction.commit()
    assert root["old"]._p_oid == oid(DELETED)
    del root["old"]
    transaction.commit()
    conn.close()
    txn = TransactionMetaData("admin", "Deleted an object", {"reason": "cleanup"})
    storage.tpc_begin(txn)
    storage.deleteObject(oid(DELETED), storage.getTid(oid(DELETED)), txn)
    storage.tpc_vote(txn)
    storage.tpc_finish(txn)
    db.close()
    return {"path": path, "blobs": blobs}


def copy_by_dump(site, tmp_path: Path, *options: str) -> Dict[str, Path]:
    dump, copy, blobs = tmp_path / "site.jsonl", tmp_path / "copy.fs", tmp_path / "copy-blobs"
    ok("dump", str(site["path"]), "-o", str(dump), "--blob-dir", str(site["blobs"]), *options)
    ok("load", str(dump), str(copy), "--blob-dir", str(blobs))
    return {"dump": dump, "path": copy, "blobs": blobs}


def verify(copy: Dict[str, Path], site, *options: str):
    return cli("verify", str(copy["path"]), "--against", str(site["path"]), "--blob-dir", str(copy["blobs"]),
               "--original-blob-dir", str(site["blobs"]), *options)


def undo_log(path: Path, blobs: Path) -> List[tuple]:
    from ZODB import DB

    db = DB(FileStorage(str(path), blob_dir=str(blobs), read_only=True))
    try:
        return [(entry["id"], entry["user_name"], entry["description"], entry.get("request_path"))
                for entry in db.undoLog(0, 100)]
    finally:
        db.close()


def blob_bytes(path: Path, blobs: Path) -> Dict[str, bytes]:
    from ZODB import DB

    db = DB(FileStorage(str(path), blob_dir=str(blobs), read_only=True))
    try:
        conn = db.open()
        root = conn.root()
        out = {}
        for name in ("image", "file"):
            with root[name].open("r") as f:
                out[name] = f.read()
        return out
    finally:
        db.close()


def exists(path: Path, n: int) -> bool:
    from ZODB.POSException import POSKeyError

    storage = FileStorage(str(path), read_only=True)
    try:
        storage.load(oid(n))
        return True
    except POSKeyError:
        return False
    finally:
        storage.close()


def assert_a_whole_copy(copy: Dict[str, Path], site, all_revisions: bool) -> None:
    """verify --against says the copy is the original's, and ZODB reads the same blob bytes, the same absent
    objects and (a copy of every revision) the same undo log from both."""
    proc = verify(copy, site, *(["--all"] if all_revisions else []))
    assert proc.returncode == 0, proc.out + proc.err
    assert "0 different, 0 missing; " in proc.out and " blob files same, 0 different" in proc.out, proc.out
    assert blob_bytes(copy["path"], copy["blobs"]) == blob_bytes(site["path"], site["blobs"])
    assert not exists(copy["path"], UNDONE) and not exists(copy["path"], DELETED)
    if all_revisions:
        assert undo_log(copy["path"], copy["blobs"]) == undo_log(site["path"], site["blobs"])


@pytest.mark.parametrize("all_revisions", [False, True])
def test_a_dump_and_load_copy_carries_blobs_metadata_and_absences(site, tmp_path, all_revisions):
    options = ("--all",) if all_revisions else ()
    copy = copy_by_dump(site, tmp_path, *options)
    assert_a_whole_copy(copy, site, all_revisions)
    if all_revisions:
        revisions = sorted((copy["dump"].parent / "site.jsonl.blobs" / oid(1).hex()).iterdir())
        assert len(revisions) == 3  # every revision of the image's blob the pack kept travelled
    lines = [json.loads(line) for line in copy["dump"].read_text("utf-8").splitlines()]
    header = next(line for line in lines if line.get("description") == "Added two files")
    assert header["user"] == "/acl_users alice" and header["extension"] == {"request_path": "/site/++add++File"}
    deleted = {"oid": oid(DELETED).hex(), "tid": lines[-1]["tid"], "deleted": True}
    assert (deleted == lines[-1]) == all_revisions  # a current copy leaves out what has no current data


def copy_by_pg(site, tmp_path: Path, dsn: str, *options: str) -> Dict[str, Path]:
    copy, blobs = tmp_path / "copy.fs", tmp_path / "copy-blobs"
    ok("pg-export", str(site["path"]), "--dsn", dsn, "--blob-dir", str(site["blobs"]), *options)
    ok("pg-import", str(copy), "--dsn", dsn, "--blob-dir", str(blobs))
    return {"path": copy, "blobs": blobs}


@pytest.mark.parametrize("all_revisions", [False, True])
def test_a_pg_export_and_import_copy_carries_blobs_metadata_and_absences(site, tmp_path, pg_dsn, all_revisions):
    import psycopg

    options = ("--all",) if all_revisions else ()
    dsn = fresh_database(pg_dsn, f"whole_{int(all_revisions)}")
    copy = copy_by_pg(site, tmp_path, dsn, *options)
    assert_a_whole_copy(copy, site, all_revisions)
    with psycopg.connect(dsn) as conn:
        tables = {name for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()}
        assert tables == {"transaction_log", "object_state", "blob_state", "pgjsonb_schema_state"} | (
            {"object_history", "pack_state"} if all_revisions else set())
        blob_revisions = conn.execute("SELECT count(*) FROM blob_state WHERE zoid = 1").fetchone()[0]
        assert blob_revisions == (3 if all_revisions else 1)  # every revision of the image's blob the pack kept
        user, extension = conn.execute("SELECT username, convert_from(extension, 'UTF8') FROM transaction_log "
                                       "WHERE description = 'Added two files'").fetchone()
        assert user == "/acl_users alice" and json.loads(extension) == {"request_path": "/site/++add++File"}
        tombstones = conn.execute("SELECT zoid FROM object_history WHERE state IS NULL ORDER BY zoid"
                                  ).fetchall() if all_revisions else []
        assert [zoid for (zoid,) in tombstones] == ([UNDONE, DELETED] if all_revisions else [])


def test_pg_export_writes_into_a_database_without_the_tables_or_not_at_all(site, tmp_path, pg_dsn):
    import psycopg

    dsn = fresh_database(pg_dsn, "whole_refusals")
    err = refused("pg-export", str(site["path"]), "--dsn", dsn)
    assert "holds blob records: give --blob-dir DIR" in err and "--no-blobs" in err
    with psycopg.connect(dsn) as conn:  # nothing half-written
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
    proc = ok("pg-export", str(site["path"]), "--dsn", dsn, "--no-blobs")
    assert "their files left out (--no-blobs)" in proc.err and "0 blobs (0 bytes) into blob_state" in proc.out
    err = refused("pg-export", str(site["path"]), "--dsn", dsn, "--blob-dir", str(site["blobs"]))
    assert "the database already has transaction_log, object_state, blob_state" in err
    err = refused("pg-import", str(tmp_path / "copy.fs"), "--dsn", dsn)
    assert "the database holds blob records: give --blob-dir DIR" in err
    assert not list(tmp_path.iterdir())
    proc = ok("pg-import", str(tmp_path / "copy.fs"), "--dsn", dsn, "--no-blobs")
    assert "their files left out (--no-blobs)" in proc.err


def undo_log_entries(path: Path) -> List[dict]:
    storage = FileStorage(str(path), read_only=True)
    try:
        return [dict(entry) for entry in storage.undoLog(0, 100)]
    finally:
        storage.close()


def test_pg_import_reads_an_edited_extension_through_the_policy(site, tmp_path, pg_dsn):
    # transaction_log.extension may hold a pickle (zodb-pgjsonb's fallback), which ZODB unpickles when it
    # lists the undo log: pg-import reads it with the codec and writes it only if the policy allows it.
    import pickle

    import psycopg

    dsn = fresh_database(pg_dsn, "whole_extension")
    ok("pg-export", str(site["path"]), "--dsn", dsn, "--no-blobs", "--all")
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE transaction_log SET extension = %s WHERE description = 'Added a draft'",
                     (pickle.dumps({"kept": (1, b"2")}, 3),))
    ok("pg-import", str(tmp_path / "copy.fs"), "--dsn", dsn, "--no-blobs")
    entry = next(e for e in undo_log_entries(tmp_path / "copy.fs") if e["description"] == b"Added a draft")
    assert entry["kept"] == (1, b"2")
    # {"a": os.system("true")}: a call in the extension
    hostile = b"\x80\x03}q\x00X\x01\x00\x00\x00aq\x01cos\nsystem\nq\x02X\x04\x00\x00\x00trueq\x03\x85q\x04Rq\x05s."
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE transaction_log SET extension = %s WHERE description = 'Added a draft'", (hostile,))
    err = refused("pg-import", str(tmp_path / "again.fs"), "--dsn", dsn, "--no-blobs")
    assert "cannot encode its extension" in err and "os" in err, err
    assert not (tmp_path / "again.fs").exists()


def test_a_blob_database_without_blob_dir_is_refused_or_left_out_on_request(site, tmp_path):
    err = refused("dump", str(site["path"]), "-o", str(tmp_path / "x.jsonl"))
    assert "holds blob records: give --blob-dir DIR" in err and "--no-blobs" in err
    assert not list(tmp_path.iterdir())  # nothing half-written
    proc = ok("dump", str(site["path"]), "-o", str(tmp_path / "x.jsonl"), "--no-blobs")
    assert "their files left out (--no-blobs)" in proc.err
    assert not (tmp_path / "x.jsonl.blobs").exists()
    err = refused("dump", str(site["path"]), "--blob-dir", str(site["blobs"]))  # standard output
    assert "give -o OUT" in err


def test_load_needs_a_blob_dir_for_a_dump_with_blobs(site, tmp_path):
    dump = tmp_path / "site.jsonl"
    ok("dump", str(site["path"]), "-o", str(dump), "--blob-dir", str(site["blobs"]))
    err = refused("load", str(dump), str(tmp_path / "copy.fs"))
    assert "holds blobs: give --blob-dir DIR" in err
    assert not (tmp_path / "copy.fs").exists()
    proc = ok("load", str(dump), str(tmp_path / "copy.fs"), "--no-blobs")
    assert "written without their files (--no-blobs)" in proc.out
    err = refused("load", str(dump), str(tmp_path / "again.fs"), "--blob-dir", str(site["blobs"]))
    assert "already exists" in err


def _rewrite(dump: Path, change) -> None:
    lines = [json.loads(line) for line in dump.read_text("utf-8").splitlines()]
    dump.write_text("".join(json.dumps(line) + "\n" for line in change(lines)), "utf-8")


def _blob_line(lines: List[dict]) -> dict:
    return next(line for line in lines if "blob" in line)


@pytest.mark.parametrize("case", ["outside the dump", "another oid's", "wrong size", "wrong checksum", "missing"])
def test_load_refuses_blob_files_a_line_does_not_vouch_for(site, tmp_path, case):
    dump = tmp_path / "site.jsonl"
    ok("dump", str(site["path"]), "-o", str(dump), "--blob-dir", str(site["blobs"]))

    def change(lines):
        line = _blob_line(lines)
        blob = line["blob"]
        if case == "outside the dump":
            blob["file"] = "../../etc/passwd"
        elif case == "another oid's":
            blob["file"] = blob["file"].replace(line["oid"], oid(255).hex())
        elif case == "wrong size":
            blob["size"] += 1
        elif case == "wrong checksum":
            blob["sha256"] = "0" * 64
        else:
            os.remove(tmp_path / blob["file"])
        return lines
    _rewrite(dump, change)
    err = refused("load", str(dump), str(tmp_path / "copy.fs"), "--blob-dir", str(tmp_path / "copy-blobs"))
    assert "line" in err
    assert not (tmp_path / "copy.fs").exists() and not (tmp_path / "copy-blobs").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".zodb-json-codec-")]


@pytest.mark.parametrize("loss", ["metadata", "absence", "blob bytes", "blob file"])
def test_verify_finds_each_loss(site, tmp_path, loss):
    dump, copy = tmp_path / "site.jsonl", {"path": tmp_path / "copy.fs", "blobs": tmp_path / "copy-blobs"}
    ok("dump", str(site["path"]), "-o", str(dump), "--blob-dir", str(site["blobs"]), "--all")
    if loss == "metadata":  # what load wrote before it carried transaction lines
        _rewrite(dump, lambda lines: [line for line in lines if "transaction" not in line])
    elif loss == "absence":  # what dump wrote before it carried revisions without data
        _rewrite(dump, lambda lines: [line for line in lines if not line.get("deleted")])
    ok("load", str(dump), str(copy["path"]), "--blob-dir", str(copy["blobs"]))
    if loss.startswith("blob"):
        blob = next((copy["blobs"]).rglob("*.blob"))
        if loss == "blob bytes":
            blob.write_bytes(blob.read_bytes()[:-1] + b"!")
        else:
            blob.unlink()
    proc = verify(copy, site, "--all")
    assert proc.returncode == 1, proc.out + proc.err
    expected = {"metadata": "metadata: differs from the original's", "absence": "without data is not in the copy",
                "blob bytes": "blob: the copy's blob file", "blob file": "blob: the copy's blob file"}[loss]
    assert expected in proc.err, proc.err


def test_zodbs_own_copy_of_a_copy_keeps_the_blobs(site, tmp_path):
    # ZODB knows a blob's record by its class pickle written as a global (ZODB.blob.is_blob_record): load
    # writes a Blob's record that way, so copyTransactionsFrom (zodbconvert's copy) takes its files along.
    copy = copy_by_dump(site, tmp_path, "--all")
    again, again_blobs = tmp_path / "again.fs", tmp_path / "again-blobs"
    source = FileStorage(str(copy["path"]), blob_dir=str(copy["blobs"]), read_only=True)
    target = FileStorage(str(again), blob_dir=str(again_blobs))
    try:
        target.copyTransactionsFrom(source)
    finally:
        source.close()
        target.close()
    assert blob_bytes(again, again_blobs) == blob_bytes(site["path"], site["blobs"])


def test_load_reads_a_dumped_line_as_it_reads_it_whole(tmp_path, monkeypatch):
    # load hands a line in dump's own spelling to the codec's one-pass reader without parsing it
    # (jsonl._record_as_dumped); every other line is parsed whole.  Both give the same record.
    import corpus
    from zodb_json_codec._db import jsonl

    path = corpus.storage_path("public", tmp_path)
    lines = [line.encode("utf-8", "surrogatepass")
             for line in ok("dump", str(path), "--all", "--jobs", "1").out.split("\n")[:-1]]
    records = [line for line in lines if line.startswith(b'{"oid"') and b'"deleted"' not in line]
    spaced = records[0].replace(b'"state":', b'"state": ')  # the reader takes the blank
    edited = [  # valid JSON that is not dump's spelling: read whole
        records[0].replace(b'"class_mod":"', b'"class_mod":"\\u0070').replace(b'"persistent', b'"ersistent', 1),
        records[0][:-1] + b',"note":",\\"refs\\":[1]"}',
    ]
    every = records + [spaced] + edited
    fast = [jsonl.entry_from_line(line + b"\n", "x") for line in every]
    taken = [jsonl._record_as_dumped(line + b"\n", "x") is not None for line in every]
    assert taken == [True] * (len(records) + 1) + [False] * len(edited)
    monkeypatch.setattr(jsonl, "_record_as_dumped", lambda line, where: None)
    assert [jsonl.entry_from_line(line + b"\n", "x") for line in every] == fast


def test_empty_and_one_byte_blobs_through_pg(tmp_path, pg_dsn):
    # blob_state's rows go in COPY's binary format: a field of length 0 is an empty bytea, not NULL.
    import transaction
    from ZODB import DB
    from ZODB.blob import Blob

    path, blobs = tmp_path / "Data.fs", tmp_path / "blobs"
    db = DB(FileStorage(str(path), blob_dir=str(blobs)))
    root = db.open().root()
    root["empty"], root["one"] = Blob(), Blob(b"x")
    transaction.commit()
    db.close()
    dsn = fresh_database(pg_dsn, "whole_small_blobs")
    ok("pg-export", str(path), "--dsn", dsn, "--blob-dir", str(blobs), "--all")
    copy = {"path": tmp_path / "copy.fs", "blobs": tmp_path / "copy-blobs"}
    ok("pg-import", str(copy["path"]), "--dsn", dsn, "--blob-dir", str(copy["blobs"]))
    proc = verify(copy, {"path": path, "blobs": blobs}, "--all")
    assert proc.returncode == 0 and "2 blob files same, 0 different" in proc.out, proc.out + proc.err


def test_pg_import_trusts_no_blob_size_edited_in_sql(site, tmp_path, pg_dsn):
    # blob_size says how many bytes data holds; edited to a petabyte it is refused at once (the bytes are
    # read until the data ends, not blob_size of them), and the copy is not made.
    import time

    import psycopg

    dsn = fresh_database(pg_dsn, "whole_blob_size")
    ok("pg-export", str(site["path"]), "--dsn", dsn, "--blob-dir", str(site["blobs"]))
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE blob_state SET blob_size = 1000000000000000 WHERE zoid = 2")
    started = time.monotonic()
    err = refused("pg-import", str(tmp_path / "copy.fs"), "--dsn", dsn, "--blob-dir", str(tmp_path / "blobs"))
    assert "blob_state says 1000000000000000 bytes, its data has" in err, err
    assert time.monotonic() - started < 60
    assert not (tmp_path / "copy.fs").exists() and not (tmp_path / "blobs").exists()
