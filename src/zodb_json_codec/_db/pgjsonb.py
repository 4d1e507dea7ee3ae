"""zodb-pgjsonb's own tables: a FileStorage written into them (pg-export), and read back (pg-import).

The layout is the one zodb-pgjsonb 1.19 creates for itself (its schema.py),
so that its ``PGJsonbStorage`` opened on the database serves the copy:

- ``transaction_log``: one row per transaction (user, description, the
  extension as JSON text or a pickle: transactions.py), and one column more,
  ``status``: FileStorage's mark of a transaction a pack went through, which
  zodb-pgjsonb does not read (its default is the usual " ");
- ``object_state``: the current revision of each object that has data;
- ``blob_state``: a blob's bytes per revision (``bytea``);
- with ``--all`` (history-preserving): ``object_history``, every other
  revision, a revision without data (a deletion, an undone creation) as
  zodb-pgjsonb's tombstone (empty class, NULL state), and ``pack_state``;
- the ``zoid_seq`` sequence and the ``pgjsonb_schema_state`` table.

The rows arrive with COPY in a staging schema, from every worker over its own
connection; keys and indexes follow, and one transaction moves the tables into
place with the trigger and the sequence (export_layout).  Blobs are streamed,
in both directions, a chunk at a time.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import struct
from typing import IO, Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from . import MAX_MESSAGE, CommandError, record_name
from .blobs import CHUNK, blob_option_hint, is_blob_record, source_blob
from .parallel import auto_jobs, batched, map_records, ordered_map
from .pg import (
    COLUMNS, connect, copy_bytes, copy_text, encoded_record, first_line, import_psycopg, int8, object_row,
    table_exists,
)
from .progress import Progress
from .storage import NewStorage, Transaction, entries, new_storage, open_storage
from .transactions import extension_from_pgjsonb, pgjsonb_extension, pgjsonb_text, status_byte

# zodb-pgjsonb's schema.py, its tables without their keys (added after the rows, as below: the names
# PostgreSQL gives the keys are the same).
_TABLES = {
    "transaction_log": """CREATE TABLE transaction_log (
    tid BIGINT NOT NULL, username TEXT DEFAULT '', description TEXT DEFAULT '', extension BYTEA DEFAULT '',
    status TEXT NOT NULL DEFAULT ' ')""",
    "object_state": """CREATE TABLE object_state (
    zoid BIGINT NOT NULL, tid BIGINT NOT NULL, class_mod TEXT NOT NULL, class_name TEXT NOT NULL,
    state JSONB, state_size INTEGER NOT NULL, refs BIGINT[] NOT NULL DEFAULT '{}')""",
    "blob_state": """CREATE TABLE blob_state (
    zoid BIGINT NOT NULL, tid BIGINT NOT NULL, blob_size BIGINT NOT NULL, data BYTEA, s3_key TEXT)""",
}
_HISTORY_TABLES = {
    "object_history": """CREATE TABLE object_history (
    zoid BIGINT NOT NULL, tid BIGINT NOT NULL, class_mod TEXT NOT NULL, class_name TEXT NOT NULL,
    state JSONB, state_size INTEGER NOT NULL, refs BIGINT[] NOT NULL DEFAULT '{}')""",
    "pack_state": "CREATE TABLE pack_state (zoid BIGINT PRIMARY KEY, tid BIGINT NOT NULL)",
}
_SCHEMA_STATE = """CREATE TABLE pgjsonb_schema_state (
    source text PRIMARY KEY, version text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
_KEYS = [
    "ALTER TABLE transaction_log ADD PRIMARY KEY (tid)",
    "ALTER TABLE object_state ADD PRIMARY KEY (zoid)",
    "ALTER TABLE object_state ADD FOREIGN KEY (tid) REFERENCES transaction_log(tid)",
    "ALTER TABLE blob_state ADD PRIMARY KEY (zoid, tid)",
    "CREATE INDEX idx_object_class ON object_state (class_mod, class_name)",
    "CREATE INDEX idx_object_refs ON object_state USING gin (refs)",
    "CREATE INDEX idx_object_state_tid_zoid ON object_state (tid, zoid)",
]
_HISTORY_KEYS = [
    "ALTER TABLE object_history ADD PRIMARY KEY (zoid, tid)",
    "CREATE INDEX idx_history_tid ON object_history (tid)",
    "CREATE INDEX idx_history_zoid_tid ON object_history (zoid, tid DESC)",
]
# zodb-pgjsonb's invalidation trigger: a commit by one instance tells the others.
_TRIGGER = [
    """CREATE OR REPLACE FUNCTION notify_commit() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('zodb_invalidations', NEW.tid::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql""",
    """CREATE TRIGGER trg_notify_commit AFTER INSERT ON transaction_log
    FOR EACH ROW EXECUTE FUNCTION notify_commit()""",
]
# zodb-pgjsonb sets LZ4 on these (PostgreSQL 14 and later); set before the rows, they are stored so.
_LZ4 = [("object_state", "state"), ("object_history", "state"), ("blob_state", "data")]
LAYOUT = (*_TABLES, *_HISTORY_TABLES, "pgjsonb_schema_state", "zoid_seq")

_TOMBSTONE = "\t\t\\N\t0\t{}\n"  # after zoid and tid: zodb-pgjsonb's row of a revision without data


class Rows(NamedTuple):
    """A batch's COPY text rows per table, and the blob revisions whose bytes follow."""
    transactions: List[str]
    current: List[str]
    history: List[str]
    blobs: List[Tuple[bytes, bytes]]


def _transaction_row(header: Transaction) -> str:
    where = f"transaction {header.tid.hex()}"
    user = pgjsonb_text(header.user, "user", where)
    description = pgjsonb_text(header.description, "description", where)
    extension = pgjsonb_extension(header.extension).hex()
    return (f"{int8(header.tid)}\t{copy_text(user)}\t{copy_text(description)}\t"
            f"\\\\x{extension}\t{header.status.decode('latin-1')}\n")


def layout_rows(batch: Sequence[Any]) -> Rows:
    """COPY text of a batch of entries (a Transaction, or (oid, tid, data, current)); CommandError for a
    record that cannot be decoded or metadata PostgreSQL cannot hold."""
    transactions: List[str] = []
    current: List[str] = []
    history: List[str] = []
    blobs: List[Tuple[bytes, bytes]] = []
    for entry in batch:
        if type(entry) is Transaction:
            transactions.append(_transaction_row(entry))
            continue
        oid, tid, data, is_current = entry
        if not data:
            history.append(f"{int8(oid)}\t{int8(tid)}\t{_TOMBSTONE}")
            continue
        (current if is_current else history).append(object_row(oid, tid, data))
        if is_blob_record(data):
            blobs.append((oid, tid))
    return Rows(transactions, current, history, blobs)


# COPY's binary format: its signature, no flags, no extension; a blob_state row: four fields, three
# bigints (each with its length, 8) and the length of the bytes that follow.
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_BLOB_ROW = struct.Struct(">hiqiqiqi")


class _Copies:
    """The export's COPY statements into the staging schema, one per batch and table."""

    def __init__(self, conn: Any, schema: str) -> None:
        from psycopg import sql

        self._conn = conn
        self._sql = {
            table: sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(schema, table), sql.SQL(", ").join(
                map(sql.Identifier, columns)))
            for table, columns in (
                ("transaction_log", ("tid", "username", "description", "extension", "status")),
                ("object_state", COLUMNS), ("object_history", COLUMNS))
        }
        self._sql["blob_state"] = sql.SQL("COPY {} (zoid, tid, blob_size, data) FROM STDIN (FORMAT binary)"
                                          ).format(sql.Identifier(schema, "blob_state"))

    def rows(self, table: str, rows: List[str]) -> None:
        if rows:
            with self._conn.cursor().copy(self._sql[table]) as copy:
                copy.write(copy_bytes(rows))

    def blobs(self, storage: Any, found: List[Tuple[bytes, bytes]]) -> int:
        """Stream each blob file into a blob_state row, a chunk at a time, in COPY's binary format: the
        bytes as they are (text would double them into hex, and a row of text is limited to 1 GB)."""
        size_total = 0
        with self._conn.cursor().copy(self._sql["blob_state"]) as copy:
            copy.write(_BINARY_HEADER)
            for oid, tid in found:
                path = source_blob(storage, oid, tid)
                with open(path, "rb") as file:
                    size = file.seek(0, 2)
                    file.seek(0)
                    if size >= 1 << 30:
                        raise CommandError(f"{record_name(oid, tid)}: its blob is {size} bytes; a bytea holds less "
                                           "than 1 GiB (zodb-pgjsonb keeps such blobs in S3)")
                    copy.write(_BLOB_ROW.pack(4, 8, int8(oid), 8, int8(tid), 8, size, size))
                    written = 0
                    for chunk in iter(lambda: file.read(CHUNK), b""):
                        copy.write(chunk)
                        written += len(chunk)
                    if written != size:
                        raise CommandError(f"{record_name(oid, tid)}: its blob file changed while it was read")
                size_total += size
            copy.write(b"\xff\xff")  # the end of the rows
        return size_total


# Each worker (or, with --jobs 1, this process) COPYs the rows it makes over a connection of its own, so
# PostgreSQL reads them in as many backends as there are workers.
_copier: Optional[Tuple[Any, _Copies]] = None


def start_copier(dsn: str, schema: str) -> None:
    global _copier
    psycopg = import_psycopg()
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise CommandError(f"cannot connect to PostgreSQL: {first_line(exc)}") from None
    _copier = conn, _Copies(conn, schema)


def stop_copier() -> None:
    global _copier
    if _copier is not None:
        _copier[0].close()
        _copier = None


class Copied(NamedTuple):
    """What a worker wrote of a batch: rows per table, and the blob revisions whose bytes follow."""
    transactions: int
    current: int
    history: int
    blobs: List[Tuple[bytes, bytes]]


def copy_batch(batch: Sequence[Any]) -> Copied:
    """The rows of a batch, written into the staging tables by this process's copier."""
    assert _copier is not None
    rows = layout_rows(batch)
    copies = _copier[1]
    try:
        copies.rows("transaction_log", rows.transactions)
        copies.rows("object_state", rows.current)
        copies.rows("object_history", rows.history)
    except import_psycopg().Error as exc:
        raise CommandError(f"PostgreSQL refused the export, nothing was written: {first_line(exc)}") from None
    return Copied(len(rows.transactions), len(rows.current), len(rows.history), rows.blobs)


def _entries(storage: Any, all_revisions: bool) -> Iterator[Any]:
    """What the workers take: headers as they are, records as (oid, tid, data, current), with data and
    position for the batching."""
    for entry in entries(storage, all_revisions):
        if type(entry) is Transaction:
            yield _Item(entry.extension, entry.position, entry)
        else:
            yield _Item(entry.data, entry.position, (entry.oid, entry.tid, entry.data, entry.current))


class _Item(NamedTuple):
    data: bytes
    position: float
    entry: Any


def _in_schema(conn: Any, schema: str, statements: Iterable[str]) -> None:
    """Run statements with unqualified names meaning schema's."""
    from psycopg import sql

    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for statement in statements:
            conn.execute(statement)


def _create(conn: Any, schema: str, all_revisions: bool) -> None:
    tables = {**_TABLES, **(_HISTORY_TABLES if all_revisions else {})}
    _in_schema(conn, schema, tables.values())
    (version,) = conn.execute("SHOW server_version_num").fetchone()
    if int(version) >= 140000:
        for table, column in _LZ4:
            if table in tables:
                with contextlib.suppress(Exception):  # a server built without LZ4
                    _in_schema(conn, schema, [f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4"])


def _move(conn: Any, staging: str, target: str, all_revisions: bool) -> None:
    """The staging schema's tables (their rows, keys and indexes) into target, with the rest of the layout;
    in the caller's transaction."""
    from psycopg import sql

    for table in (*_TABLES, *(_HISTORY_TABLES if all_revisions else ())):
        conn.execute(sql.SQL("ALTER TABLE {} SET SCHEMA {}").format(sql.Identifier(staging, table),
                                                                   sql.Identifier(target)))
    conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(target)))
    for statement in _TRIGGER + [_SCHEMA_STATE]:
        conn.execute(statement)
    (top,) = conn.execute("SELECT COALESCE(MAX(zoid), 0) FROM object_state").fetchone()
    conn.execute(f"CREATE SEQUENCE zoid_seq START WITH {int(top) + 1}")


def _fill(conn: Any, storage: Any, staging: str, dsn: str, counts: Dict[str, int], all_revisions: bool,
          jobs: int, progress: Progress, no_blobs: bool, refusal: Optional[str]) -> None:
    """The staging tables' rows: the records' by the workers, the blobs' here (left out with no_blobs,
    refused with refusal when there is no blob directory to read them from)."""
    copies = _Copies(conn, staging)
    batches = map_records(_entries(storage, all_revisions), copy_batch, jobs, progress,
                          prepare=lambda item: item.entry, counted=lambda item: type(item.entry) is not Transaction,
                          initializer=start_copier, initargs=(dsn, staging))
    with contextlib.closing(batches):  # the workers and their connections gone before the staging is dropped
        for copied in batches:
            for key in ("transactions", "current", "history"):
                counts[key] += getattr(copied, key)
            if not copied.blobs:
                continue
            if no_blobs:
                counts["left_out"] += len(copied.blobs)
            elif refusal is not None:
                raise CommandError(refusal)
            else:
                counts["blob_bytes"] += copies.blobs(storage, copied.blobs)
                counts["blobs"] += len(copied.blobs)


def export_layout(source: Optional[str], *, dsn: str, out: IO[str], err: IO[str], all_revisions: bool = False,
                  blob_dir: Optional[str] = None, no_blobs: bool = False, jobs: int = 1) -> int:
    """Copy the FileStorage source into zodb-pgjsonb's tables of a database (its first schema on the
    search path) that has none of them yet.

    The tables are filled in a staging schema of their own, by every worker over its own connection, and
    moved into place, with the rest of the layout, in one transaction at the end: until then nobody sees
    them, and on any failure (Ctrl-C too) the staging schema is dropped, so nothing is left.
    """
    psycopg = import_psycopg()
    from psycopg import sql

    if blob_dir is not None and no_blobs:
        raise CommandError("give --blob-dir or --no-blobs, not both")
    progress = Progress("pg-export", err)
    counts = {"transactions": 0, "current": 0, "history": 0, "blobs": 0, "blob_bytes": 0, "left_out": 0}
    with open_storage(source, blob_dir) as storage, connect(dsn) as conn:
        found = [name for name in LAYOUT if table_exists(conn, name)]
        if found:
            raise CommandError(f"the database already has {', '.join(found)}: pg-export writes zodb-pgjsonb's "
                               "tables into a database (or a schema: search_path in the DSN) that has none of them")
        staging = f"zodb_json_codec_export_{os.getpid()}_{secrets.token_hex(4)}"
        try:
            (target,) = conn.execute("SELECT current_schema()").fetchone()
            if target is None:
                raise CommandError("no schema to write into: the DSN's search_path names none that exists")
            try:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(staging)))
                _create(conn, staging, all_revisions)
                _fill(conn, storage, staging, dsn, counts, all_revisions, jobs, progress, no_blobs,
                      refusal=blob_option_hint(source) if blob_dir is None else None)
                stop_copier()
                _in_schema(conn, staging, _KEYS + (_HISTORY_KEYS if all_revisions else []))
                with conn.transaction():
                    _move(conn, staging, target, all_revisions)
            finally:
                stop_copier()
                with contextlib.suppress(psycopg.Error):
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(staging)))
        except psycopg.Error as exc:
            raise CommandError(f"PostgreSQL refused the export, nothing was written: {first_line(exc)}") from None
        finally:
            progress.close()
    history = f", {counts['history']} earlier revisions into object_history" if all_revisions else ""
    print(f"pg-export: {counts['current']} objects into object_state{history}, {counts['transactions']} "
          f"transactions into transaction_log, {counts['blobs']} blobs ({counts['blob_bytes']} bytes) into "
          "blob_state", file=out)
    if counts["left_out"]:
        print(f"pg-export: {counts['left_out']} blob records, their files left out (--no-blobs)", file=err)
    return 0


# --- pg-import -------------------------------------------------------------------------------------------

class _Revision(NamedTuple):
    oid: bytes
    tid: bytes
    data: Optional[bytes]  # None: a revision without data
    blob: bool


def _revision(row: Sequence[Any]) -> _Revision:
    """The record of an object_state or object_history row (zoid, tid, class_mod, class_name, state text)."""
    zoid, tid, module, name, state_text = row
    oid, tid_bytes = zoid.to_bytes(8, "big", signed=True), tid.to_bytes(8, "big", signed=True)
    if state_text is None:
        if module or name:
            raise CommandError(f"zoid {zoid} tid {tid}: state is NULL, but the row is not a tombstone "
                               "(its class is not empty)")
        return _Revision(oid, tid_bytes, None, False)
    return _Revision(oid, tid_bytes, encoded_record(zoid, tid, module, name, state_text),
                     (module, name) == ("ZODB.blob", "Blob"))


def revisions(batch: Sequence[Sequence[Any]]) -> List[_Revision]:
    return [_revision(row) for row in batch]


def _header(row: Sequence[Any]) -> Transaction:
    tid, user, description, extension, status = row
    where = f"transaction tid {tid}"
    return Transaction(tid.to_bytes(8, "big", signed=True), status_byte(status, where),
                       (user or "").encode("utf-8"), (description or "").encode("utf-8"),
                       extension_from_pgjsonb(bytes(extension or b""), where), 0.0)


class _Blobs:
    """blob_state's rows, each streamed into a file for the new storage."""

    def __init__(self, conn: Any, present: bool, blob_dir: Optional[str], no_blobs: bool) -> None:
        self._conn = conn
        self._present = present
        self._blob_dir = blob_dir
        self._no_blobs = no_blobs
        self.copied = 0
        self.left_out = 0

    def fetch(self, revision: _Revision, target: NewStorage) -> Optional[str]:
        """A file holding the revision's blob (None with --no-blobs); CommandError if it has none."""
        where = record_name(revision.oid, revision.tid)
        if self._no_blobs:
            self.left_out += 1
            return None
        if self._blob_dir is None:
            raise CommandError("the database holds blob records: give --blob-dir DIR (the blob directory to "
                               "create for the new FileStorage), or --no-blobs to leave the blobs out")
        keys = (int8(revision.oid), int8(revision.tid))
        found = self._conn.execute(
            "SELECT blob_size, data IS NULL, s3_key FROM blob_state WHERE zoid = %s AND tid = %s", keys,
        ).fetchone() if self._present else None
        if found is None:
            raise CommandError(f"{where}: a Blob without its row in blob_state")
        size, no_data, s3_key = found
        if no_data:
            raise CommandError(f"{where}: its blob is kept outside PostgreSQL ({s3_key!r}); pg-import reads "
                               "blob_state's data only"[:MAX_MESSAGE])
        path = target.incoming_blob()
        with open(path, "wb") as file:
            while True:  # until the data ends (blob_size, maybe edited in SQL, is only checked against it)
                (chunk,) = self._conn.execute("SELECT substring(data FROM %s FOR %s) FROM blob_state "
                                              "WHERE zoid = %s AND tid = %s", (file.tell() + 1, CHUNK, *keys)
                                              ).fetchone()
                file.write(chunk)
                if len(chunk) < CHUNK:
                    break
            written = file.tell()
        if written != size:
            raise CommandError(f"{where}: blob_state says {size} bytes, its data has {written}")
        self.copied += 1
        return path


_REVISIONS = """SELECT zoid, tid, class_mod, class_name, state::text FROM object_state
{history} ORDER BY tid, zoid"""
# Earlier zodb-pgjsonb versions also kept the current revision in object_history: it is read once.
_HISTORY = """UNION ALL SELECT h.zoid, h.tid, h.class_mod, h.class_name, h.state::text FROM object_history h
WHERE NOT EXISTS (SELECT 1 FROM object_state s WHERE s.zoid = h.zoid AND s.tid = h.tid)"""


def _columns(conn: Any, table: str) -> List[str]:
    rows = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                        "AND NOT attisdropped", (table,)).fetchall()
    return [name for (name,) in rows]


def import_layout(target: str, *, dsn: str, out: IO[str], err: IO[str], blob_dir: Optional[str] = None,
                  no_blobs: bool = False, jobs: Optional[int] = 1) -> int:
    """Write the transactions and revisions of zodb-pgjsonb's tables (history included, where kept) into a
    new FileStorage at target, with their blobs in the new blob_dir."""
    psycopg = import_psycopg()
    if blob_dir is not None and no_blobs:
        raise CommandError("give --blob-dir or --no-blobs, not both")
    progress = Progress("pg-import", err)
    with new_storage(target, blob_dir) as storage, connect(dsn) as conn:
        try:
            missing = [name for name in ("transaction_log", "object_state") if not table_exists(conn, name)]
            if missing:
                raise CommandError(f"no table {' or '.join(missing)} in the database: not zodb-pgjsonb's layout "
                                   "(give --table for a table pg-export --table wrote)")
            history = table_exists(conn, "object_history")
            status = "status" if "status" in _columns(conn, "transaction_log") else "' '"
            blobs = _Blobs(conn, table_exists(conn, "blob_state"), blob_dir, no_blobs)
            total = size = 0
            for table in ("object_state", "object_history") if history else ("object_state",):
                rows, pickled = conn.execute(f"SELECT count(*), coalesce(sum(state_size), 0) FROM {table}").fetchone()
                total, size = total + rows, size + int(pickled)
            jobs = auto_jobs("pg-import", size) if jobs is None else jobs
            with conn.transaction():  # named (server-side) cursors live in a transaction
                headers = conn.cursor(name="zodb_json_codec_transactions")
                headers.itersize = 2000
                headers.execute(f"SELECT tid, username, description, extension, {status} FROM transaction_log "
                                "ORDER BY tid")
                rows = conn.cursor(name="zodb_json_codec_revisions")
                rows.itersize = 500  # rows of a few KB: enough per round trip, little memory
                rows.execute(_REVISIONS.format(history=_HISTORY if history else ""))
                _write(storage, map(_header, headers), ordered_map(
                    revisions, batched(rows, lambda row: len(row[4] or "")), jobs), blobs, progress, total)
                rows.close()
                headers.close()
        except psycopg.Error as exc:
            raise CommandError(f"cannot read zodb-pgjsonb's tables: {first_line(exc)}") from None
        finally:
            progress.close()
    print(f"pg-import: {storage.records} records in {storage.transactions} transactions, {storage.blobs} blobs "
          f"into {target}", file=out)
    if blobs.left_out:
        print(f"pg-import: {blobs.left_out} blob records, their files left out (--no-blobs)", file=err)
    return 0


def _write(storage: NewStorage, headers: Iterator[Transaction], batches: Iterator[List[_Revision]], blobs: _Blobs,
           progress: Progress, total: int) -> None:
    """Each transaction of the log (also one without revisions) with its revisions, in tid order."""
    header = next(headers, None)
    for batch in batches:
        for revision in batch:
            while header is not None and header.tid <= revision.tid:
                storage.transaction(header, f"transaction {header.tid.hex()}")
                header = next(headers, None)
            where = record_name(revision.oid, revision.tid)
            path = blobs.fetch(revision, storage) if revision.blob else None
            storage.add(revision.oid, revision.tid, revision.data, where, blob=path)
        progress.update(storage.records, storage.records / max(total, 1))
    while header is not None:
        storage.transaction(header, f"transaction {header.tid.hex()}")
        header = next(headers, None)
