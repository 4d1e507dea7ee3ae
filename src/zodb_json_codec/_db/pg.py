"""PostgreSQL: FileStorage records to a table laid out as zodb-pgjsonb's object_state, and such a table back to records.

Rows are written with COPY; workers turn records into COPY text, so the
main process only moves bytes.  Without ``--part`` the table is created,
filled and indexed in one transaction: a failure leaves no table at all.
With ``--part K/N`` several exporters (machines) fill one table: it is
created (once, under an advisory lock) in a short transaction of its own,
and each part's rows arrive in one transaction, all or nothing.
"""

from __future__ import annotations

import contextlib
from typing import IO, Any, Iterator, List, Optional, Sequence, Tuple

import zodb_json_codec as codec
from zodb_json_codec._jsonread import read_json

from . import MAX_MESSAGE, CommandError, undecodable
from .blobs import with_zodb_blob_class
from .parallel import auto_jobs, batched, map_records, ordered_map
from .progress import Progress
from .storage import Part, new_storage, open_storage, records

COLUMNS = ("zoid", "tid", "class_mod", "class_name", "state", "state_size", "refs")
CURRENT_TABLE = "object_state"
HISTORY_TABLE = "object_history"



def copy_text(text: str) -> str:
    """text as a field of COPY's text format, where a backslash starts an escape and tab and newline end
    fields and rows.  str.replace, not translate: a translate table costs a lookup per character (8.5 of
    the 15.9 s of pg-export --all of the Plone site)."""
    text = text.replace("\\", "\\\\")
    if "\t" in text or "\n" in text or "\r" in text:  # never in the codec's JSON text; in a class name, maybe
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise CommandError(
            f"this command needs psycopg 3 to talk to PostgreSQL ({exc}); "
            'install it with: pip install "psycopg[binary]" (or install this package with its cli extra)'
        ) from None
    return psycopg


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (PostgreSQL adds context lines), or its type."""
    text = str(exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:MAX_MESSAGE]


@contextlib.contextmanager
def connect(dsn: str) -> Iterator[Any]:
    """An autocommit psycopg connection (``with conn.transaction()`` makes transactions); CommandError if it fails."""
    psycopg = import_psycopg()
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise CommandError(f"cannot connect to PostgreSQL: {first_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - e.g. psycopg's ctypes libpq on PyPy 7.3 (pypy/pypy#3882)
        raise CommandError(f"cannot connect to PostgreSQL: {type(exc).__name__}: {first_line(exc)}") from None
    try:
        yield conn
    finally:
        conn.close()


def table_identifier(name: str) -> Any:
    """The SQL identifier of "table" or "schema.table"."""
    from psycopg import sql

    parts = name.split(".")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise CommandError(f"not a table name: {name!r} (give TABLE or SCHEMA.TABLE)")
    return sql.Identifier(*parts)


def table_exists(conn: Any, name: str) -> bool:
    # to_regclass wants SQL syntax: quote each part as an identifier.
    quoted = ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (quoted,)).fetchone()[0]


INDEX_SUFFIXES = ("_key", "_class", "_refs", "_tid_zoid")
STAGING_SUFFIX = "__export"


def _index_statements(table_name: str, all_revisions: bool, if_not_exists: bool) -> List[Any]:
    """The key and the indexes zodb-pgjsonb creates: by class, GIN on refs (who points at an object), by (tid, zoid)."""
    from psycopg import sql

    table = table_identifier(table_name)
    stem = table_name.split(".")[-1]
    maybe = sql.SQL("IF NOT EXISTS " if if_not_exists else "")
    key = sql.SQL("zoid, tid" if all_revisions else "zoid")
    # Named after the table, so several exports can share a schema.
    key_, class_, refs_, tid_zoid_ = (sql.Identifier(stem + suffix) for suffix in INDEX_SUFFIXES)
    return [
        sql.SQL("CREATE UNIQUE INDEX {maybe}{name} ON {table} ({key})").format(
            maybe=maybe, name=key_, table=table, key=key),
        sql.SQL("CREATE INDEX {maybe}{name} ON {table} (class_mod, class_name)").format(
            maybe=maybe, name=class_, table=table),
        sql.SQL("CREATE INDEX {maybe}{name} ON {table} USING gin (refs)").format(
            maybe=maybe, name=refs_, table=table),
        sql.SQL("CREATE INDEX {maybe}{name} ON {table} (tid, zoid)").format(
            maybe=maybe, name=tid_zoid_, table=table),
    ]


def _swap_statements(staging: str, table: str) -> List[Any]:
    """Drop table, and give staging and its indexes table's names (cheap: catalog changes only)."""
    from psycopg import sql

    *schema, stem = table.split(".")
    staging_stem = staging.split(".")[-1]
    statements = [
        sql.SQL("DROP TABLE IF EXISTS {}").format(table_identifier(table)),
        sql.SQL("ALTER TABLE {} RENAME TO {}").format(table_identifier(staging), sql.Identifier(stem)),
    ]
    for suffix in INDEX_SUFFIXES:
        statements.append(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
            sql.Identifier(*schema, staging_stem + suffix), sql.Identifier(stem + suffix)))
    return statements


def _create_statement(table_name: str, if_not_exists: bool) -> Any:
    from psycopg import sql

    return sql.SQL(
        "CREATE TABLE {maybe}{table} ("
        "zoid BIGINT NOT NULL, tid BIGINT NOT NULL, class_mod TEXT NOT NULL, class_name TEXT NOT NULL, "
        "state JSONB NOT NULL, state_size INTEGER NOT NULL, refs BIGINT[] NOT NULL DEFAULT '{{}}')"
    ).format(maybe=sql.SQL("IF NOT EXISTS " if if_not_exists else ""), table=table_identifier(table_name))


def int8(value: bytes) -> int:
    """An oid or tid as a bigint: signed, as refs are (format.md), so an oid at or above 2**63 is still a
    bigint, and the same number in zoid as in the refs pointing to it."""
    return int.from_bytes(value, "big", signed=True)


def object_row(oid: bytes, tid: bytes, data: bytes) -> str:
    """A record's COPY text row of object_state's columns; CommandError for one that cannot be decoded."""
    try:
        module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(data)
    except Exception as exc:  # noqa: BLE001 - any failure to decode stops the export
        raise CommandError(undecodable(oid, tid, exc)) from None
    return (f"{int8(oid)}\t{int8(tid)}\t{copy_text(module)}\t{copy_text(name)}\t{copy_text(state_json)}\t"
            f"{len(data)}\t{{{','.join(map(str, refs))}}}\n")


def copy_bytes(rows: List[str]) -> bytes:
    """COPY text rows as sent.  surrogatepass: a lone surrogate in a class name must reach PostgreSQL,
    which refuses it with a message, rather than fail here."""
    return "".join(rows).encode("utf-8", "surrogatepass")


def copy_rows(batch: Sequence[Tuple[bytes, bytes, bytes]]) -> bytes:
    """COPY text rows for a batch of (oid, tid, record); CommandError for a record that cannot be decoded."""
    return copy_bytes([object_row(oid, tid, data) for oid, tid, data in batch])


def encoded_record(zoid: int, tid: int, module: str, name: str, state_text: str) -> bytes:
    """The record of a row's class columns and state text, a Blob's with its class pickle as ZODB writes it;
    CommandError for a state the encoder refuses."""
    try:
        data = codec.encode_zodb_record({"@cls": [module, name], "@s": read_json(state_text)})
    except ValueError as exc:
        raise CommandError(f"zoid {zoid} tid {tid}: cannot encode the state: {exc}"[:MAX_MESSAGE]) from None
    if (module, name) == ("ZODB.blob", "Blob"):
        data = with_zodb_blob_class(data)
    return data


def record_from_row(row: Sequence[Any]) -> Tuple[bytes, bytes, bytes]:
    """(oid, tid, record) of a (zoid, tid, class_mod, class_name, state text) row."""
    zoid, tid, module, name, state_text = row
    if state_text is None:
        raise CommandError(f"zoid {zoid} tid {tid}: state is NULL")
    return (zoid.to_bytes(8, "big", signed=True), tid.to_bytes(8, "big", signed=True),
            encoded_record(zoid, tid, module, name, state_text))


def records_from_rows(batch: Sequence[Sequence[Any]]) -> List[Tuple[bytes, bytes, bytes]]:
    return [record_from_row(row) for row in batch]


def export(source: Optional[str], target: Optional[str], *, dsn: str, out: IO[str], err: IO[str],
           all_revisions: bool = False, part: Optional[Part] = None, jobs: int = 1, replace: bool = False) -> int:
    """Copy the records of the FileStorage source into a new table target (default: by all_revisions).

    With part, the rows go into a table shared by the parts.

    With replace, an existing table is replaced: the new one is built beside
    it under another name and swapped in at the end of the one transaction,
    so readers see the old table, whole, until the commit.
    """
    psycopg = import_psycopg()
    from psycopg import sql

    if replace and part is not None:
        raise CommandError("--replace cannot go with --part: the parts fill one table together")
    table = target or (HISTORY_TABLE if all_revisions else CURRENT_TABLE)
    table_identifier(table)  # a bad name is refused before any work
    build = table + STAGING_SUFFIX if replace else table
    copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
        table_identifier(build), sql.SQL(", ").join(map(sql.Identifier, COLUMNS)))
    progress = Progress("pg-export", err)
    with open_storage(source) as storage, connect(dsn) as conn:
        try:
            if part is None:
                if not replace and table_exists(conn, table):
                    raise CommandError(f"table {table} already exists; drop it, name another with --table, "
                                       "or replace it with --replace")
            else:
                with conn.transaction():
                    # Parts may start together: one creates the table, the others wait and find it.
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"zodb-json-codec {table}",))
                    conn.execute(_create_statement(table, if_not_exists=True))
                    for statement in _index_statements(table, all_revisions, if_not_exists=True):
                        conn.execute(statement)
            with conn.transaction():
                if part is None:
                    conn.execute(_create_statement(build, if_not_exists=False))
                with conn.cursor().copy(copy_sql) as copy:
                    for chunk in map_records(records(storage, all_revisions, part), copy_rows, jobs, progress):
                        copy.write(chunk)
                if part is None:  # indexes built once over all rows: faster than row by row
                    for statement in _index_statements(build, all_revisions, if_not_exists=False):
                        conn.execute(statement)
                if replace:
                    for statement in _swap_statements(build, table):
                        conn.execute(statement)
        except psycopg.errors.DuplicateTable:
            raise CommandError(f"table {build} already exists; drop it, or name another with --table") from None
        except psycopg.errors.UniqueViolation as exc:
            raise CommandError(
                f"table {table} already holds some of these objects (was this part exported before?): "
                f"{first_line(exc)}"
            ) from None
        except psycopg.Error as exc:
            raise CommandError(f"PostgreSQL refused the export, nothing was written: {first_line(exc)}") from None
        finally:
            progress.close()
    what = "record revisions" if all_revisions else "objects"
    print(f"pg-export: {progress.done} {what} into table {table}", file=out)
    return 0


def import_(source: str, target: str, *, dsn: str, out: IO[str], err: IO[str], jobs: Optional[int] = 1) -> int:
    """Write the rows of the table source (in tid order) into a new FileStorage at target."""
    psycopg = import_psycopg()
    from psycopg import sql

    table = source
    identifier = table_identifier(table)
    progress = Progress("pg-import", err)
    with new_storage(target) as storage, connect(dsn) as conn:
        try:
            if not table_exists(conn, table):
                raise CommandError(f"no table {table} in the database")
            total, size = conn.execute(sql.SQL("SELECT count(*), coalesce(sum(state_size), 0) FROM {}").format(
                identifier)).fetchone()
            jobs = auto_jobs("pg-import", int(size)) if jobs is None else jobs
            with conn.transaction():  # a named (server-side) cursor lives in a transaction
                cursor = conn.cursor(name="zodb_json_codec_import")
                cursor.itersize = 500  # rows of a few KB: enough per round trip, little memory
                cursor.execute(sql.SQL(
                    "SELECT zoid, tid, class_mod, class_name, state::text FROM {} ORDER BY tid, zoid"
                ).format(identifier))
                batches = batched(cursor, lambda row: len(row[4] or ""))
                for batch in ordered_map(records_from_rows, batches, jobs):
                    for oid, tid, data in batch:
                        storage.add(oid, tid, data, f"zoid {int.from_bytes(oid, 'big', signed=True)}")
                    progress.update(storage.records, storage.records / max(total, 1))
                cursor.close()
        except psycopg.Error as exc:
            raise CommandError(f"cannot read table {table}: {first_line(exc)}") from None
        finally:
            progress.close()
    print(f"pg-import: {storage.records} records in {storage.transactions} transactions into {target}", file=out)
    return 0
