"""Whole databases through the command line: dump/load and pg-export/pg-import round trips, verify, stats, bad input.

Every command runs in a child process, as users run it.  The round trips
are checked twice: by ``verify --against`` and, independently, by loading
both records of every oid and tid here and comparing the object graphs.
"""

from __future__ import annotations

import datetime
import json
import os
import pty
import struct
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import corpus
from helpers import cli, fresh_database
from zodb_json_codec._db.fidelity import load_record, same

from ZODB.FileStorage import FileStorage

pytestmark = pytest.mark.slow  # whole databases through the command line and PostgreSQL: over a minute

PYPY = sys.implementation.name == "pypy"
needs_psycopg = pytest.mark.skipif(
    PYPY, reason="psycopg 3 fails on PyPy 7.3 (pypy/pypy#3882); the pg commands need it"
)


def ok(*args: str, **kw) -> subprocess.CompletedProcess:
    proc = cli(*args, **kw)
    assert proc.returncode == 0, proc.err
    return proc


def refused(*args: str, **kw) -> str:
    """The one-line message of a command that must fail with exit status 2."""
    proc = cli(*args, **kw)
    assert proc.returncode == 2, (proc.returncode, proc.err)
    assert proc.err.count("\n") == 1 and "Traceback" not in proc.err, proc.err
    assert proc.err.startswith(f"zodb-json-codec {args[0]}: error: "), proc.err
    return proc.err


def current_tid(storage: FileStorage, oid: bytes) -> Optional[bytes]:
    from ZODB.POSException import POSKeyError

    try:
        return storage.getTid(oid)
    except POSKeyError:  # its creation was undone
        return None


def zodb_records(path: Path, all_revisions: bool = True) -> List[Tuple[bytes, bytes, bytes]]:
    """(oid, tid, record) of every revision with data, or only of current ones, as ZODB's FileIterator reads them."""
    storage = FileStorage(str(path), read_only=True)
    try:
        return [(rec.oid, rec.tid, rec.data) for txn in storage.iterator() for rec in txn
                if rec.data and (all_revisions or current_tid(storage, rec.oid) == rec.tid)]
    finally:
        storage.close()


def revisions(path: Path, all_revisions: bool = True) -> Dict[Tuple[bytes, bytes], bytes]:
    """{(oid, tid): record} of every revision with data, or only of current ones."""
    return {(oid, tid): data for oid, tid, data in zodb_records(path, all_revisions)}


def assert_same_database(original: Path, copy: Path, all_revisions: bool) -> None:
    """copy holds exactly original's records (current ones, or all), each loading to the same objects."""
    want = revisions(original, all_revisions)
    got = revisions(copy)
    assert set(got) == set(want)
    if not all_revisions:
        assert got.keys() == revisions(copy, False).keys()  # the copy's current revisions are the original's
    for key, data in want.items():
        assert same(load_record(data, as_written=True), load_record(got[key])), key


def assert_nothing_left(directory: Path) -> None:
    assert not [p.name for p in directory.iterdir() if p.name.startswith(".zodb-json-codec-")]


def jsonl_lines(text: str) -> List[str]:
    # Lines end at "\n" only: a state may hold U+2028 unescaped.
    assert text.endswith("\n")
    return text[:-1].split("\n")


# ---------------------------------------------------------------------------
# databases
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Dict[str, Path]:
    directory = tmp_path_factory.mktemp("corpora")
    return {name: corpus.storage_path(name, directory) for name in corpus.NAMES}


@pytest.fixture(scope="module")
def history_fs(tmp_path_factory) -> Path:
    """A database written by ZODB: several transactions, changed objects, a split BTree, an undone creation."""
    import transaction
    from BTrees.OOBTree import OOBTree
    from persistent.list import PersistentList
    from persistent.mapping import PersistentMapping
    from ZODB import DB

    from zodbapp import Item

    path = tmp_path_factory.mktemp("history") / "Data.fs"
    db = DB(FileStorage(str(path)))
    conn = db.open()
    root = conn.root()
    root["items"] = PersistentList()
    root["index"] = OOBTree()
    for i in range(60):
        item = Item()
        item.title = f"Item {i} – ünïcode"
        item.created = datetime.datetime(2024, 1, 1 + i % 28, tzinfo=datetime.timezone(datetime.timedelta(hours=i % 5)))
        item.parent = root["items"]
        root["items"].append(item)
        root["index"][f"key-{i:04d}"] = item
        if i % 20 == 19:
            transaction.commit()
    for item in root["items"][::7]:
        item.title += " (edited)"
        transaction.commit()
    root["doomed"] = PersistentMapping(gone=True)
    transaction.commit()
    db.undo(db.undoLog(0, 1)[0]["id"])
    transaction.commit()
    conn.close()
    db.close()
    return path


@pytest.fixture(scope="module")
def broken_fs(tmp_path_factory) -> Path:
    """A FileStorage whose last transaction holds one good record and one that is no pickle at all."""
    import transaction
    from persistent.mapping import PersistentMapping
    from ZODB import DB
    from ZODB.Connection import TransactionMetaData
    from ZODB.serialize import ObjectWriter

    path = tmp_path_factory.mktemp("broken") / "Data.fs"
    storage = FileStorage(str(path))
    db = DB(storage)
    conn = db.open()
    conn.root()["x"] = PersistentMapping(a=1)
    transaction.commit()
    conn.close()
    txn = TransactionMetaData()
    storage.tpc_begin(txn)
    good = ObjectWriter().serialize(PersistentMapping(b=2))
    storage.store(storage.new_oid(), b"\0" * 8, good, "", txn)
    storage.store(storage.new_oid(), b"\0" * 8, b"this is no pickle", "", txn)
    storage.tpc_vote(txn)
    storage.tpc_finish(txn)
    db.close()
    return path


# ---------------------------------------------------------------------------
# dump and load
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("all_revisions", [False, True], ids=["current", "all"])
def test_file_scan_reads_what_zodb_reads(all_revisions, corpora, history_fs, broken_fs):
    """The commands' own straight-through reader gives the records ZODB's FileIterator gives."""
    from zodb_json_codec._db.storage import open_storage, records

    for path in (*corpora.values(), history_fs, broken_fs):
        with open_storage(str(path)) as storage:
            got = [(rec.oid, rec.tid, rec.data) for rec in records(storage, all_revisions)]
        assert got == zodb_records(path, all_revisions)


@pytest.mark.parametrize("all_revisions", [False, True], ids=["current", "all"])
@pytest.mark.parametrize("name", ["public", "wikipedia", "history"])
def test_dump_load_round_trip(name, all_revisions, corpora, history_fs, tmp_path):
    original = history_fs if name == "history" else corpora[name]
    flag = ["--all"] if all_revisions else []
    dumped = tmp_path / "dump.jsonl"
    ok("dump", str(original), "-o", str(dumped), "--jobs", "1", *flag)
    rows = [json.loads(line) for line in jsonl_lines(dumped.read_text(encoding="utf-8"))]
    lines = [row for row in rows if "oid" in row]  # a transaction's line comes before its records
    assert len([row for row in lines if not row.get("deleted")]) == len(revisions(original, all_revisions))
    assert len([row for row in rows if "transaction" in row]) == len({row["tid"] for row in lines})
    copy = tmp_path / "copy.fs"
    proc = ok("load", str(dumped), str(copy), "--jobs", "1")
    assert proc.out.startswith(f"load: {len(lines)} records in ")
    assert_same_database(original, copy, all_revisions)
    proc = ok("verify", str(copy), "--against", str(original), "--jobs", "1", *flag)
    assert proc.out.startswith(f"verify: {len(lines)} records compared with {original}: {len(lines)} same, 0 different")
    assert_nothing_left(tmp_path)


def test_load_from_stdin_with_workers(history_fs, tmp_path):
    text = ok("dump", str(history_fs), "--all", "--jobs", "2").stdout
    copy = tmp_path / "copy.fs"
    ok("load", "-", str(copy), "--jobs", "2", stdin=text)
    assert_same_database(history_fs, copy, all_revisions=True)


def test_jobs_do_not_change_the_output(corpora):
    one = ok("dump", str(corpora["wikipedia"]), "--all", "--jobs", "1").stdout
    assert ok("dump", str(corpora["wikipedia"]), "--all", "--jobs", "2").stdout == one
    assert ok("stats", str(corpora["wikipedia"]), "--jobs", "2").stdout == ok("stats", str(corpora["wikipedia"]), "--jobs", "1").stdout


def test_parts_split_the_objects(corpora):
    whole = jsonl_lines(ok("dump", str(corpora["public"]), "--jobs", "1").out)
    parts = [jsonl_lines(ok("dump", str(corpora["public"]), "--jobs", "1", "--part", f"{k}/3").out) for k in (1, 2, 3)]
    assert all(parts)
    records = [[line for line in lines if line.startswith('{"oid"')] for lines in [whole] + parts]
    assert sorted(sum(records[1:], [])) == sorted(records[0])
    for k, lines in enumerate(records[1:]):
        assert {int(json.loads(line)["oid"], 16) % 3 for line in lines} == {k}
    transactions = {line for line in whole if line.startswith('{"transaction"')}
    assert set().union(*[set(lines) - set(part) for lines, part in zip(parts, records[1:])]) <= transactions


def test_dump_reports_undecodable_records_and_goes_on(broken_fs):
    proc = cli("dump", str(broken_fs), "--jobs", "1")
    assert proc.returncode == 1
    records = [line for line in jsonl_lines(proc.out) if line.startswith('{"oid"')]
    assert len(records) == 3  # the root, x, the good record of the last transaction
    assert "cannot decode" in proc.err and "1 records could not be decoded" in proc.err


def test_stats_count_undecodable_records_apart(broken_fs):
    proc = cli("stats", str(broken_fs), "--jobs", "1")
    assert proc.returncode == 1
    rows = {line.split()[-1]: line.split()[0] for line in proc.out.splitlines()[1:-1]}
    assert rows == {"persistent.mapping.PersistentMapping": "3", "decodable)": "1"}
    assert "(not decodable)" in proc.out


def test_progress_on_a_terminal_only(corpora):
    master, slave = pty.openpty()
    try:
        proc = cli("dump", str(corpora["wikipedia"]), "--jobs", "1", "--all", stderr=slave)
    finally:
        os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert proc.returncode == 0
    text = shown.decode()
    assert "dump: 1692 records in " in text and "/s" in text, text
    assert proc.err == ""
    assert ok("dump", str(corpora["wikipedia"]), "--jobs", "1").err == ""  # piped: quiet


# ---------------------------------------------------------------------------
# verify --against, stats
# ---------------------------------------------------------------------------


def test_verify_against_finds_changed_and_missing_records(history_fs, tmp_path):
    lines = [line for line in jsonl_lines(ok("dump", str(history_fs), "--jobs", "1").out) if line.startswith('{"oid"')]
    whole = tmp_path / "whole.fs"
    ok("load", "-", str(whole), "--jobs", "1", stdin="".join(line + "\n" for line in lines).encode())
    changed = json.loads(lines[5])
    changed["state"]["title"] = "something else"
    lines[5] = json.dumps(changed)
    del lines[9]
    copy = tmp_path / "copy.fs"
    ok("load", "-", str(copy), "--jobs", "1", stdin="".join(line + "\n" for line in lines).encode())
    proc = cli("verify", str(copy), "--against", str(history_fs), "--jobs", "1")
    assert proc.returncode == 1
    assert f"{len(lines)} records compared" in proc.out and ": different: " in proc.err
    assert f"{len(lines) - 1} same, 1 different, 0 not in the original, 1 missing;" in proc.out, proc.out
    proc = cli("verify", str(whole), "--against", str(copy), "--jobs", "1")
    assert proc.returncode == 1 and "1 different, 1 not in the original, 0 missing" in proc.out, proc.out


def test_stats_add_up(history_fs):
    proc = ok("stats", str(history_fs), "--jobs", "1")
    rows = [line.split() for line in proc.out.splitlines()[1:]]
    current = revisions(history_fs, all_revisions=False)
    *classes, total = rows
    assert total[:3] == [str(len(current)), str(sum(map(len, current.values()))), total[2]]
    assert sum(int(row[0]) for row in classes) == len(current)
    assert {row[3] for row in classes} >= {"zodbapp.Item", "BTrees.OOBTree.OOBucket", "persistent.list.PersistentList"}
    assert [int(row[0]) for row in classes] == sorted((int(row[0]) for row in classes), reverse=True)
    all_rows = ok("stats", str(history_fs), "--all", "--jobs", "1").out.splitlines()
    assert all_rows[-1].split()[0] == str(len(revisions(history_fs)))


# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------


def pg_rows(dsn: str, query: str) -> list:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query)
        return cursor.fetchall() if cursor.description else []


def table_exists(dsn: str, table: str) -> bool:
    return pg_rows(dsn, f"SELECT to_regclass('{table}') IS NOT NULL")[0][0]


@needs_psycopg
@pytest.mark.parametrize("all_revisions", [False, True], ids=["current", "all"])
@pytest.mark.parametrize("name", ["public", "wikipedia", "history"])
def test_pg_round_trip(name, all_revisions, corpora, history_fs, pg_dsn, tmp_path):
    original = history_fs if name == "history" else corpora[name]
    flag = ["--all"] if all_revisions else []
    table = f"rt_{name}_{'all' if all_revisions else 'current'}"
    proc = ok("pg-export", str(original), "--dsn", pg_dsn, "--table", table, "--jobs", "2", *flag)
    want = revisions(original, all_revisions)
    assert proc.out == f"pg-export: {len(want)} {'record revisions' if all_revisions else 'objects'} into table {table}\n"
    rows = pg_rows(pg_dsn, f"SELECT zoid, tid, class_mod, class_name, state_size, refs FROM {table}")
    assert len(rows) == len(want)
    assert {(zoid.to_bytes(8, "big"), tid.to_bytes(8, "big")) for zoid, tid, *_ in rows} == set(want)
    assert all(size == len(want[(z.to_bytes(8, "big"), t.to_bytes(8, "big"))]) for z, t, _, _, size, _ in rows)
    copy = tmp_path / "copy.fs"
    ok("pg-import", str(copy), "--dsn", pg_dsn, "--table", table, "--jobs", "2")
    assert_same_database(original, copy, all_revisions)
    proc = cli("verify", str(copy), "--against", str(original), "--jobs", "2", "--show", "1000", *flag)
    # Not carried by the table yet: transaction metadata (no transaction_log) and revisions without data.
    # verify names each: every object is the original's, and only those are listed.
    assert f"{len(want)} same, 0 different, 0 not in the original" in proc.out, proc.out
    problems = [line for line in proc.err.splitlines() if line.startswith("  ")]
    assert all(": metadata: " in line or "revision without data is not" in line for line in problems), proc.err
    pg_rows(pg_dsn, f"DROP TABLE {table}")


@needs_psycopg
def test_pg_oids_beyond_2_63(pg_dsn, tmp_path):
    """zoid, tid and refs are signed 64-bit: an oid at 2**63 or above is a negative zoid, the same in refs."""
    from persistent.mapping import PersistentMapping
    from ZODB.Connection import TransactionMetaData
    from ZODB.serialize import ObjectWriter
    from ZODB.utils import p64

    import zodb_json_codec

    path = tmp_path / "high.fs"
    storage = FileStorage(str(path))
    high = p64(2**63 + 5)
    txn = TransactionMetaData()
    storage.tpc_begin(txn)
    storage.store(high, b"\0" * 8, ObjectWriter().serialize(PersistentMapping(x=1)), "", txn)
    pointer = zodb_json_codec.encode_zodb_record(
        {"@cls": ["persistent.mapping", "PersistentMapping"],
         "@s": {"data": {"high": {"@ref": [high.hex(), "persistent.mapping.PersistentMapping"]}}}})
    storage.store(p64(0), b"\0" * 8, pointer, "", txn)
    storage.tpc_vote(txn)
    storage.tpc_finish(txn)
    storage.close()
    ok("pg-export", str(path), "--dsn", pg_dsn, "--table", "high", "--jobs", "1")
    rows = pg_rows(pg_dsn, "SELECT zoid, refs FROM high ORDER BY zoid")
    assert rows == [(-(2**63) + 5, []), (0, [-(2**63) + 5])]
    copy = tmp_path / "copy.fs"
    ok("pg-import", str(copy), "--dsn", pg_dsn, "--table", "high", "--jobs", "1")
    assert_same_database(path, copy, all_revisions=True)
    pg_rows(pg_dsn, "DROP TABLE high")


@needs_psycopg
def test_pg_indexes_and_refs(history_fs, pg_dsn):
    ok("pg-export", str(history_fs), "--dsn", pg_dsn, "--table", "layout", "--jobs", "1")
    indexes = {row[0] for row in pg_rows(pg_dsn, "SELECT indexname FROM pg_indexes WHERE tablename = 'layout'")}
    assert indexes == {"layout_key", "layout_class", "layout_refs", "layout_tid_zoid"}
    (items_zoid, refs), = pg_rows(pg_dsn, "SELECT zoid, refs FROM layout WHERE class_name = 'PersistentList'")
    children = pg_rows(pg_dsn, f"SELECT count(*) FROM layout WHERE zoid = ANY(ARRAY{refs}::bigint[]) AND class_name = 'Item'")
    assert children == [(60,)]
    assert pg_rows(pg_dsn, f"SELECT count(*) FROM layout WHERE refs @> ARRAY[{items_zoid}::bigint]") == [(60 + 1,)]
    pg_rows(pg_dsn, "DROP TABLE layout")


@needs_psycopg
def test_pg_parts_fill_one_table(corpora, pg_dsn):
    path = str(corpora["wikipedia"])
    ok("pg-export", path, "--dsn", pg_dsn, "--table", "whole", "--jobs", "1")
    for k in ("2/2", "1/2"):
        ok("pg-export", path, "--dsn", pg_dsn, "--table", "parts", "--part", k, "--jobs", "1")
    query = "SELECT zoid, tid, class_mod, class_name, state::text, state_size, refs FROM {} ORDER BY zoid"
    assert pg_rows(pg_dsn, query.format("parts")) == pg_rows(pg_dsn, query.format("whole"))
    message = refused("pg-export", path, "--dsn", pg_dsn, "--table", "parts", "--part", "1/2", "--jobs", "1")
    assert "already holds some of these objects" in message
    assert pg_rows(pg_dsn, "SELECT count(*) FROM parts") == pg_rows(pg_dsn, "SELECT count(*) FROM whole")
    pg_rows(pg_dsn, "DROP TABLE parts, whole")


@needs_psycopg
def test_verify_through_jsonb(corpora, pg_dsn):
    proc = ok("verify", str(corpora["wikipedia"]), "--pg", pg_dsn, "--jobs", "2")
    assert proc.out.strip() == (
        "verify: 1692 records, 1692 same (dict path), 1692 same (json path), 1692 same (pg path), 0 lost"
    )


# ---------------------------------------------------------------------------
# bad input: one line, exit status 2, nothing half-written
# ---------------------------------------------------------------------------

READERS = [["dump"], ["stats"], ["verify"], ["pg-export", "--dsn", "host=/nonexistent"]]


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_missing_file(command, tmp_path):
    message = refused(command[0], str(tmp_path / "nope.fs"), *command[1:])
    assert f"no such file: {tmp_path / 'nope.fs'}" in message


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_not_a_filestorage(command, tmp_path):
    junk = tmp_path / "junk.fs"
    junk.write_bytes(b"this is not a FileStorage\n" * 10)
    assert f"cannot open {junk} as a FileStorage" in refused(command[0], str(junk), *command[1:])


@pytest.mark.parametrize("command", READERS[:3], ids=lambda c: c[0])
def test_truncated_filestorage(command, corpora, tmp_path):
    # A last transaction cut short is what a database being written looks like: read up to it, and said
    # (tests/test_safe_commands.py has the rest).
    data = corpora["public"].read_bytes()
    cut = tmp_path / "cut.fs"
    cut.write_bytes(data[: len(data) - 100])
    proc = ok(command[0], str(cut), "--jobs", "1")
    assert f"{cut}: its last transaction is incomplete (being written, or cut short): read up to byte" in proc.err


def test_dump_output_is_written_whole_or_not_at_all(tmp_path, corpora):
    out = tmp_path / "out.jsonl"
    damaged = tmp_path / "damaged.fs"  # after the last transaction, a header that is no transaction being written
    damaged.write_bytes(corpora["public"].read_bytes() + struct.pack(">8sQcHHH", b"\xff" * 8, 15, b" ", 0, 0, 0))
    refused("dump", str(damaged), "-o", str(out))
    assert not out.exists()
    assert_nothing_left(tmp_path)


def good_lines(history_fs: Path) -> List[str]:
    return jsonl_lines(ok("dump", str(history_fs), "--all", "--jobs", "1").out)


def _edit(lines: List[str], index: int, **changes) -> List[str]:
    row = json.loads(lines[index])
    for key, value in changes.items():
        if value is None:
            del row[key]
        else:
            row[key] = value
    return lines[:index] + [json.dumps(row)] + lines[index + 1:]


MALFORMED = {
    "not JSON": (lambda lines: lines[:3] + ["{oops"] + lines[4:], "line 4: not JSON"),
    "not an object": (lambda lines: lines[:3] + ["[1, 2]"] + lines[4:], "line 4: a line must be a JSON object"),
    "bad oid": (lambda lines: _edit(lines, 3, oid="12345"), "line 4: 'oid' must be 16 hex digits"),
    "bad tid": (lambda lines: _edit(lines, 3, tid="zzzzzzzzzzzzzzzz"), "line 4: 'tid' must be 16 hex digits"),
    "no class": (lambda lines: _edit(lines, 3, class_mod=None), "line 4: a line needs"),
    "bad state": (lambda lines: _edit(lines, 3, state={"x": {"@b": "not base64!"}}), "line 4: oid "),
    "out of order": (lambda lines: lines[:3] + [lines[-1]] + lines[3:-1], "line 5: tid "),
    "oid twice": (lambda lines: lines[:4] + [lines[3]] + lines[4:], "line 5: oid "),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_json_lines(case, history_fs, tmp_path):
    damage, where = MALFORMED[case]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(line + "\n" for line in damage(good_lines(history_fs))), encoding="utf-8")
    out = tmp_path / "out.fs"
    message = refused("load", str(source), str(out), "--jobs", "1")
    assert f"{source} {where}" in message, message
    assert not out.exists() and not Path(f"{out}.index").exists()
    assert_nothing_left(tmp_path)


def test_load_refuses_bad_bytes_and_existing_output(history_fs, tmp_path):
    out = tmp_path / "out.fs"
    assert "stdin line 1: not JSON" in refused("load", "-", str(out), stdin=b"\xff\xfe{}\n")
    assert not out.exists()
    out.write_bytes(b"precious")
    assert f"{out} already exists" in refused("load", "-", str(out), stdin=b"")
    assert out.read_bytes() == b"precious"
    assert "no such file" in refused("load", str(tmp_path / "nope.jsonl"), str(tmp_path / "new.fs"))
    assert not (tmp_path / "new.fs").exists()
    assert_nothing_left(tmp_path)


UNREACHABLE = "host=/nonexistent/socket/dir port=5 dbname=x user=y connect_timeout=5"


@needs_psycopg
def test_unreachable_database(history_fs, tmp_path):
    for args in (["pg-export", str(history_fs)], ["pg-import", str(tmp_path / "out.fs")], ["verify", str(history_fs)]):
        dsn_flag = "--pg" if args[0] == "verify" else "--dsn"
        assert "cannot connect to PostgreSQL: " in refused(*args, dsn_flag, UNREACHABLE)
    assert not (tmp_path / "out.fs").exists()
    assert_nothing_left(tmp_path)


@needs_psycopg
def test_existing_table_is_left_alone(history_fs, corpora, pg_dsn):
    ok("pg-export", str(history_fs), "--dsn", pg_dsn, "--table", "taken", "--jobs", "1")
    before = pg_rows(pg_dsn, "SELECT zoid, tid, state::text FROM taken ORDER BY zoid")
    message = refused("pg-export", str(corpora["public"]), "--dsn", pg_dsn, "--table", "taken", "--jobs", "1")
    assert "table taken already exists" in message
    assert pg_rows(pg_dsn, "SELECT zoid, tid, state::text FROM taken ORDER BY zoid") == before
    pg_rows(pg_dsn, "DROP TABLE taken")


@needs_psycopg
def test_replace_swaps_a_table_in_whole(history_fs, corpora, broken_fs, pg_dsn, tmp_path):
    rows = "SELECT zoid, tid, state::text FROM swap ORDER BY zoid"
    ok("pg-export", str(history_fs), "--dsn", pg_dsn, "--table", "swap", "--replace", "--jobs", "1")  # none yet
    before = pg_rows(pg_dsn, rows)
    assert len(before) == len(revisions(history_fs, all_revisions=False))
    # A failed replacement leaves the old table as it was, and no staging table.
    assert "cannot decode" in refused("pg-export", str(broken_fs), "--dsn", pg_dsn, "--table", "swap", "--replace")
    assert pg_rows(pg_dsn, rows) == before
    assert not table_exists(pg_dsn, "swap__export")
    ok("pg-export", str(corpora["public"]), "--dsn", pg_dsn, "--table", "swap", "--replace", "--jobs", "2")
    assert not table_exists(pg_dsn, "swap__export")
    indexes = {row[0] for row in pg_rows(pg_dsn, "SELECT indexname FROM pg_indexes WHERE tablename = 'swap'")}
    assert indexes == {"swap_key", "swap_class", "swap_refs", "swap_tid_zoid"}
    copy = tmp_path / "copy.fs"
    ok("pg-import", str(copy), "--dsn", pg_dsn, "--table", "swap", "--jobs", "1")
    assert_same_database(corpora["public"], copy, all_revisions=False)
    assert "--replace cannot go with --part" in refused(
        "pg-export", str(history_fs), "--dsn", pg_dsn, "--table", "swap", "--replace", "--part", "1/2")
    pg_rows(pg_dsn, "DROP TABLE swap")


@needs_psycopg
def test_failed_export_leaves_no_table(broken_fs, pg_dsn):
    message = refused("pg-export", str(broken_fs), "--dsn", pg_dsn, "--table", "broken", "--jobs", "2")
    assert "cannot decode" in message and "nothing was written" not in message
    assert not table_exists(pg_dsn, "broken")
    # A part adds all of its rows or none (the shared table itself may already exist).
    refused("pg-export", str(broken_fs), "--dsn", pg_dsn, "--table", "broken_parts", "--part", "1/1", "--jobs", "1")
    assert pg_rows(pg_dsn, "SELECT count(*) FROM broken_parts") == [(0,)]
    pg_rows(pg_dsn, "DROP TABLE broken_parts")


@needs_psycopg
def test_pg_import_bad_table(pg_dsn, tmp_path):
    out = tmp_path / "out.fs"
    assert "no table no_such_table in the database" in refused("pg-import", str(out), "--dsn", pg_dsn,
                                                              "--table", "no_such_table")
    pg_rows(pg_dsn, "CREATE TABLE not_ours (zoid bigint)")
    assert "cannot read table not_ours" in refused("pg-import", str(out), "--dsn", pg_dsn, "--table", "not_ours")
    pg_rows(pg_dsn, "INSERT INTO not_ours VALUES (1)")
    pg_rows(pg_dsn, "DROP TABLE not_ours")
    assert not out.exists()
    assert_nothing_left(tmp_path)


def test_bad_options(tmp_path):
    for args in (["dump", "--jobs", "0"], ["dump", "--part", "3/2"], ["dump", "--part", "x"]):
        proc = cli(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.err
    assert "--all goes with --against" in refused("verify", "--all")


def test_ctrl_c_stops_cleanly(corpora, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): one line, exit 130, nothing written."""
    import signal
    import time

    lines = ok("dump", str(corpora["wikipedia"]), "--all", "--jobs", "1").stdout
    out = tmp_path / "out.fs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zodb_json_codec", "load", "-", str(out), "--jobs", "2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        # As a terminal starts it: a suite run in the background of a
        # non-interactive shell ignores SIGINT, and a child inherits that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    proc.stdin.write(lines)  # then keep standard input open: load waits for more, workers started
    proc.stdin.flush()
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert stderr.decode() == "zodb-json-codec load: interrupted; nothing half-written was kept\n"
    assert not out.exists()
    assert_nothing_left(tmp_path)


def test_ctrl_c_in_pg_export_leaves_no_table(corpora, pg_dsn):
    """pg-export fills a staging schema of its own (every worker over its own connection) and moves the
    tables into place at the end: Ctrl-C in the middle drops the staging schema, and nothing is left."""
    import signal
    import time

    import psycopg

    dsn = fresh_database(pg_dsn, "interrupted")
    proc = subprocess.Popen(
        [sys.executable, "-m", "zodb_json_codec", "pg-export", str(corpora["wikipedia"]), "--dsn", dsn, "--all",
         "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as test_ctrl_c_stops_cleanly
    )
    rows_in_staging = "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname LIKE 'zodb_json_codec_export_%%' " \
        "AND n_tup_ins > 0"
    with psycopg.connect(dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 60
        while conn.execute(rows_in_staging).fetchone()[0] == 0 and proc.poll() is None:
            assert time.monotonic() < deadline, "no rows arrived in a minute"
            time.sleep(0.05)
        assert proc.poll() is None, "the export ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, (proc.returncode, stderr)
        assert stderr.decode() == "zodb-json-codec pg-export: interrupted; nothing half-written was kept\n"
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'zodb_json_codec%%' UNION ALL "
                            "SELECT relname FROM pg_class JOIN pg_namespace n ON n.oid = relnamespace "
                            "WHERE nspname = 'public'").fetchall()
        assert left == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full to simulate a full disk")
def test_full_disk_is_one_line(corpora):
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "zodb_json_codec", "dump", str(corpora["public"]), "--jobs", "1"],
                              stdout=full, stderr=subprocess.PIPE, timeout=600)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.count("\n") == 1 and "No space left on device" in err, err


@pytest.mark.parametrize("field", ["record", "transaction"])
def test_damage_in_the_middle_is_found(field, corpora, tmp_path):
    """With a .index, FileStorage opens a file damaged in the middle; reading it must say so, not crash."""
    import shutil

    path = tmp_path / "damaged.fs"
    shutil.copyfile(corpora["public"], path)
    FileStorage(str(path)).close()  # writes the .index that lets FileStorage skip its scan
    storage = FileStorage(str(path), read_only=True)
    transactions = storage.iterator()
    try:
        for number, txn in enumerate(transactions):
            if number == 3:
                record = next(iter(txn))
                offset = record.pos + 24 if field == "record" else txn._tpos + 8  # its tloc, or the transaction length
                break
    finally:
        transactions.close()  # an iterator left open keeps its file open
        storage.close()
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\x7f" * 8)
    for command in ("dump", "stats"):
        assert f"{path} is damaged: " in refused(command, str(path), "--jobs", "1")


def test_stats_globals_of_a_file_and_its_allowlist(corpora, tmp_path):
    # docs/security.md, "Auditing a database": every global by role, each mode's verdict, and the lines strict
    # needs, written into a new file only.
    proc = ok("stats", "--globals", str(corpora["public"]), "--jobs", "1")
    lines = proc.out.splitlines()
    assert lines[0].split()[:5] == ["records", "role", "standard", "strict-calls", "strict"]
    row = next(line.split() for line in lines if line.endswith(" corpusapp.content.Color"))
    assert row[1:5] == ["call", "ok", "refused", "refused"]
    assert "refused by standard: 0," in proc.out
    allow = tmp_path / "site.allow"
    ok("stats", "--globals", str(corpora["public"]), "--write-allowlist", str(allow), "--jobs", "1")
    assert "call corpusapp.content.Color" in allow.read_text().splitlines()
    assert "exists" in refused("stats", "--globals", str(corpora["public"]), "--write-allowlist", str(allow))
    # With that list, strict allows everything the file names.
    env = {**os.environ, "ZODB_JSON_CODEC_GLOBALS_ALLOW": str(allow)}
    listed = subprocess.run([sys.executable, "-m", "zodb_json_codec", "stats", "--globals", str(corpora["public"]),
                             "--jobs", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert listed.returncode == 0 and "strict: 0" in listed.stdout, listed.stdout[-2000:]


def test_stats_globals_show_rows_edited_in_sql(history_fs, pg_dsn):
    ok("pg-export", str(history_fs), "--dsn", pg_dsn, "--table", "audited", "--jobs", "1")
    proc = ok("stats", "--globals", "--pg", pg_dsn, "--table", "audited")
    assert "refused by standard: 0," in proc.out
    (zoid,), = pg_rows(pg_dsn, "SELECT min(zoid) FROM audited WHERE class_name = 'Item'")
    pg_rows(pg_dsn, "UPDATE audited SET state = jsonb_set(state, '{x}', "
                    "'{\"@reduce\": {\"callable\": {\"@cls\": [\"os\", \"system\"]}, \"args\": {\"@t\": [\"id\"]}}}') "
                    f"WHERE zoid = {zoid}")
    proc = cli("stats", "--globals", "--pg", pg_dsn, "--table", "audited")
    assert proc.returncode == 1
    assert "1 rows someone has edited that standard refuses:" in proc.out
    assert f"oid {zoid:016x}: call os.system:" in proc.out
    pg_rows(pg_dsn, "DROP TABLE audited")
