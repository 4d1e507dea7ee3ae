"""Whole databases: the machinery behind the command line's dump, load, pg-export, pg-import, verify and stats.

Nothing here is imported by the codec itself; ZODB and psycopg are imported
only when a command needs them.
"""


class CommandError(Exception):
    """A problem to report in one line, without a traceback."""


MAX_MESSAGE = 500  # characters: a damaged record's repr must not flood the terminal


def record_name(oid: bytes, tid: bytes) -> str:
    """How messages name a record revision."""
    return f"oid {oid.hex()} tid {tid.hex()}"


def undecodable(oid: bytes, tid: bytes, exc: BaseException) -> str:
    """The message for a record the codec cannot decode."""
    return f"{record_name(oid, tid)}: cannot decode: {type(exc).__name__}: {exc}"[:MAX_MESSAGE]
