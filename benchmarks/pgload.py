"""Loading records from a real PostgreSQL table one zoid at a time, as a storage's load() does.

The table is what ``zodb-json-codec pg-export`` writes (zodb-pgjsonb's
object_state layout: zoid, tid, class_mod, class_name, state jsonb, ...).
Each pass fetches every zoid in turn with its own SELECT through psycopg 3
(one connection, one transaction; psycopg prepares the statement after a
few executions, as it does for a storage) and turns the row into the
record bytes:

- fetch only: ``state::text``, nothing else (the floor);
- (a) old: ``state`` (psycopg json.loads it), unsanitize_from_pg, the Rust
  codec's encode_zodb_record;
- (b) ``state`` (json.loads by psycopg), this codec's encode_zodb_record;
- (c) ``state`` fetched with an identity json loader (the column's UTF-8
  bytes, docs/api.md), this codec's encode_zodb_record_from_pg_json;
- (c) ... ``str``: the same from ``state::text`` (a str).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pgserver

from loadpath import unsanitize_from_pg  # noqa: E402

TABLE = "zjc_bench_object_state"
JSON_QUERY = "SELECT class_mod, class_name, state FROM {table} WHERE zoid = %s"
TEXT_QUERY = "SELECT class_mod, class_name, state::text FROM {table} WHERE zoid = %s"


@contextlib.contextmanager
def server(dsn: Optional[str]) -> Iterator[Tuple[str, str]]:
    """(dsn, what it is): the given DSN, or a throwaway server (tests/pgserver.py) stopped on exit.

    Raises pgserver.PgServerError (or ImportError without psycopg) with the reason when there is none.
    """
    import psycopg  # noqa: F401 - fail here, with the reason, when the driver is missing

    if dsn is not None:
        yield dsn, "the server given by --dsn"
        return
    from pgserver import PgServer

    pg = PgServer.start()
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        yield pg.dsn, f"a throwaway PostgreSQL {version} (tests/pgserver.py)"
    finally:
        pg.stop()


def export(fs_path: Path, dsn: str, table: str = TABLE) -> None:
    """The FileStorage's current revisions into table, by the project's own pg-export command."""
    cmd = [sys.executable, "-m", "zodb_json_codec", "pg-export", str(fs_path),
           "--dsn", dsn, "--table", table, "--replace", "--jobs", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"pg-export exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")


def drop(dsn: str, table: str = TABLE) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def zoids(conn: Any, table: str = TABLE) -> List[int]:
    from psycopg import sql

    return [row[0] for row in conn.execute(sql.SQL("SELECT zoid FROM {} ORDER BY zoid").format(sql.Identifier(table)))]


def _loader(conn: Any, query: str, table: str, convert: Callable[[str, str, Any], Any],
            raw_json: bool = False) -> Callable[[int], Any]:
    """zoid -> convert(class_mod, class_name, state); with raw_json, jsonb comes as the bytes psycopg reads."""
    from psycopg import sql
    from psycopg.types.json import set_json_loads

    statement = sql.SQL(query).format(table=sql.Identifier(table))
    cursor = conn.cursor()
    if raw_json:
        set_json_loads(lambda data: data, cursor)

    def load(zoid: int) -> Any:
        cursor.execute(statement, (zoid,))
        module, name, state = cursor.fetchone()
        return convert(module, name, state)

    return load


def loaders(
    conn: Any,
    rust_encode: Optional[Callable[[Any], bytes]],
    encode: Callable[[Any], bytes],
    from_pg_json: Optional[Callable[[str, str, str], bytes]],
    twin: str,
    table: str = TABLE,
) -> Dict[str, Callable[[int], Any]]:
    """zoid -> record functions by label; (a) without the Rust codec and (c) without the function are left out.

    encode and from_pg_json are those of one twin of this codec, named twin in the labels.
    """
    out = {"fetch only": _loader(conn, TEXT_QUERY, table, lambda module, name, text: text)}
    if rust_encode is not None:
        out["(a) old"] = _loader(conn, JSON_QUERY, table, lambda module, name, state: rust_encode(
            {"@cls": [module, name], "@s": unsanitize_from_pg(state)}))
    out[f"(b) {twin}"] = _loader(conn, JSON_QUERY, table, lambda module, name, state: encode(
        {"@cls": [module, name], "@s": state}))
    if from_pg_json is not None:
        out[f"(c) {twin}"] = _loader(conn, JSON_QUERY, table, from_pg_json, raw_json=True)
        out[f"(c) {twin} str"] = _loader(conn, TEXT_QUERY, table, from_pg_json)
    return out


def passes(load_fns: Dict[str, Callable[[int], Any]], ids: Sequence[int]) -> Dict[str, Callable[[], List[Any]]]:
    return {label: (lambda fn=fn: [fn(zoid) for zoid in ids]) for label, fn in load_fns.items()}
