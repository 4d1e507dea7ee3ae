"""Whole databases: the machinery behind the command line's dump, load, pg-export, pg-import, verify and stats.

Nothing here is imported by the codec itself; ZODB and psycopg are imported
only when a command needs them.
"""


class CommandError(Exception):
    """A problem to report in one line, without a traceback."""
