"""JSON texts through a real PostgreSQL jsonb column and back, in one query.

psycopg 3 serves CPython.  On PyPy 7.3 its ctypes libpq wrapper trips over a
PyPy ctypes bug (pypy/pypy#3882: "cannot create weak reference to 'weakref'
object"), so there the pure-Python driver pg8000 talks to the same socket.
"""

from __future__ import annotations

import sys
from typing import Any, List, Sequence, Tuple, Type

from zodb_json_codec._jsonread import read_json

QUERY = "SELECT j::jsonb::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(j, n) ORDER BY n"


def _dsn_fields(dsn: str) -> dict:
    return dict(part.split("=", 1) for part in dsn.split())


class JsonbConnection:
    """One connection for many round trips (a connection serves one thread at a time)."""

    def __init__(self, dsn: str) -> None:
        self.pypy = sys.implementation.name == "pypy"
        if self.pypy:
            import pg8000.native

            f = _dsn_fields(dsn)
            self._conn = pg8000.native.Connection(f["user"], database=f["dbname"],
                                                  unix_sock=f"{f['host']}/.s.PGSQL.{f['port']}")
        else:
            import psycopg

            self._conn = psycopg.connect(dsn, autocommit=True)

    def texts(self, texts: Sequence[str]) -> List[str]:
        """What PostgreSQL gives back for each text after casting it to jsonb."""
        if self.pypy:
            # One query per text: pg8000 writes the array ['null'] as an
            # unquoted literal, which PostgreSQL reads as SQL NULL.
            return [self._conn.run("SELECT CAST(:j AS jsonb)::text", j=text)[0][0] for text in texts]
        return [row[0] for row in self._conn.execute(QUERY, (list(texts),)).fetchall()]

    def close(self) -> None:
        self._conn.close()


def jsonb_texts(dsn: str, texts: Sequence[str]) -> List[str]:
    """What PostgreSQL gives back for each text after casting it to jsonb (on a connection of its own)."""
    conn = JsonbConnection(dsn)
    try:
        return conn.texts(texts)
    finally:
        conn.close()


def database_errors() -> Tuple[Type[BaseException], ...]:
    """What jsonb_texts raises when PostgreSQL refuses a text (the driver's error classes)."""
    if sys.implementation.name == "pypy":
        import pg8000.native

        return (pg8000.native.DatabaseError,)
    import psycopg

    return (psycopg.Error,)


def record_after_jsonb(impl: Any, data: bytes, dsn: str) -> bytes:
    """The record the JSON text path gives back after a real jsonb column.

    The text is read with the codec's own reader: json.loads overflows on
    the deepest states the codec takes (three JSON levels per @d level).
    """
    module, name, text, _ = impl.decode_zodb_record_for_pg_json(data)
    (stored,) = jsonb_texts(dsn, [text])
    return impl.encode_zodb_record({"@cls": [module, name], "@s": read_json(stored)})
