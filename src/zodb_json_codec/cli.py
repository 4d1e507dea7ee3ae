"""The ``zodb-json-codec`` command line: whole FileStorages to JSON Lines and PostgreSQL and back, with proof.

The sample database shipped in the package is read with ``--sample``, or,
by the commands that only read (verify, stats), when they are given no
PATH.  Reading FileStorages needs ZODB and PostgreSQL needs psycopg 3 (this
package's ``cli`` extra brings both); they are imported only when a command
runs.  The work itself lives in ``_db``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import IO, Any, Callable, Optional, Sequence

import zodb_json_codec as codec

from ._db import CommandError
from ._db.parallel import auto_jobs, default_jobs
from ._db.storage import Part

MAX_FAILURES_SHOWN = 10


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"not a number of processes: {text!r}")
    return jobs


def _part(text: str) -> Part:
    k, _, n = text.partition("/")
    try:
        part = (int(k), int(n))
    except ValueError:
        part = (0, 0)
    if not 1 <= part[0] <= part[1]:
        raise argparse.ArgumentTypeError(f"not K/N with 1 <= K <= N: {text!r}")
    return part


def _add_path(p: argparse.ArgumentParser, writes: bool) -> None:
    """PATH, and --sample for the sample database; a command that writes somewhere needs one of them."""
    default = "" if writes else " (default: the sample database, said on standard error)"
    p.add_argument("path", nargs="?", metavar="PATH", help=f"a FileStorage (.fs), opened read-only{default}")
    p.add_argument("--sample", action="store_true",
                   help="read the small sample database shipped with the package instead of PATH")
    p.set_defaults(writes_elsewhere=writes)


def _stats_of_postgresql(args: argparse.Namespace) -> bool:
    """stats --globals --pg: a database's rows, no FileStorage."""
    return args.command == "stats" and args.pg is not None


def _check_path(args: argparse.Namespace, err: IO[str]) -> None:
    """The sample database only when asked for, or, for a command that only reads, when there is no PATH."""
    if not hasattr(args, "sample"):
        return
    if args.sample and args.path is not None:
        raise CommandError("give PATH or --sample, not both")
    if args.path is not None or args.sample or _stats_of_postgresql(args):
        return
    if args.writes_elsewhere:
        raise CommandError("give the FileStorage to read (PATH), or --sample for the sample database "
                           "shipped with the package")
    from ._db import storage

    storage.SAMPLE_NOTE = (f"zodb-json-codec {args.command}: no PATH given: reading the sample database "
                           "shipped with the package")


def _add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("-j", "--jobs", type=_jobs, metavar="N",
                   help=f"decode in N processes (default: one for a small database, the cores, {default_jobs()} "
                   "here, for a large one: docs/commands.md)")


def _input_size(args: argparse.Namespace) -> Optional[int]:
    """The bytes a command reads (None: not known before it starts), for the default --jobs."""
    if args.command == "load":
        name = None if args.source == "-" else args.source
    elif args.command == "pg-import" or _stats_of_postgresql(args):
        return None  # in PostgreSQL: pg-import measures it itself
    elif args.path is None:
        from ._db.storage import sample_path

        with sample_path() as name:
            return os.path.getsize(name)
    else:
        name = args.path
    try:
        return os.path.getsize(name) if name is not None else None
    except OSError:
        return None  # the command says what is wrong with it


def _add_part(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", type=_part, metavar="K/N",
                   help="only the objects whose oid %% N == K-1: part K of N, to split one export over machines")


def _add_all(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--all", dest="all_revisions", action="store_true",
                   help=f"every revision of every object, not only the current ones{what}")


def _add_dsn(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dsn", default="", metavar="DSN",
                   help='libpq connection string, e.g. "dbname=site host=/run/postgresql" '
                   "(default: libpq's PG* environment variables)")


def _add_blob_options(p: argparse.ArgumentParser, blob_dir_help: str) -> None:
    p.add_argument("--blob-dir", metavar="DIR", help=blob_dir_help)
    p.add_argument("--no-blobs", action="store_true",
                   help="leave the blobs' files out (their records are kept); said again in the summary")


def _add_scan_options(p: argparse.ArgumentParser, all_what: str) -> None:
    """--all, --jobs and --part, of the commands that read every record of a FileStorage."""
    _add_all(p, all_what)
    _add_jobs(p)
    _add_part(p)


def _command(commands: Any, name: str, handler: Callable[..., int], **texts: str) -> argparse.ArgumentParser:
    """The sub-parser of a command, bound to its handler."""
    p = commands.add_parser(name, **texts)
    p.set_defaults(handler=handler)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zodb-json-codec",
        description="Convert ZODB databases to JSON (JSON Lines, PostgreSQL jsonb) and back, and prove nothing is lost.",
        epilog="A progress line (rate, ETA) appears on standard error when it is a terminal.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {codec.__version__} ({codec.IMPLEMENTATION})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = _command(
        commands, "dump", _dump, help="a FileStorage as JSON Lines",
        description='One line per object revision, in transaction order: {"oid", "tid", "class_mod", '
        '"class_name", "state", "refs"}, oid and tid as 16 hex digits, state as '
        "decode_zodb_record_for_pg_json writes it; before each transaction's records its line "
        '{"transaction", "status", "user", "description", "extension"}; {"oid", "tid", "deleted": true} '
        "for a revision without data; a blob's file copied to OUT.blobs and named by its record's line. "
        "Records the codec cannot decode are reported on standard error, and the exit status is 1.",
    )
    _add_path(p, writes=True)
    p.add_argument("-o", "--output", metavar="OUT", help="write to OUT (complete or not at all) instead of standard output")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists (never the database itself)")
    _add_blob_options(p, "the database's blob directory (ZODB does not record it in the Data.fs): each blob "
                      "revision's file is copied to OUT.blobs")
    _add_scan_options(p, "")

    p = _command(
        commands, "load", _load, help="JSON Lines (as dump writes them) into a new FileStorage",
        description="Encode every line back into a record and write them into a new FileStorage with their "
        "oids and tids; lines must come in transaction order, as dump writes them. The new file appears "
        "only when complete.",
    )
    p.add_argument("source", metavar="JSONL", help='the JSON Lines file, or "-" for standard input')
    p.add_argument("output", metavar="OUT.fs", help="the FileStorage to create (must not exist)")
    _add_blob_options(p, "the blob directory to create for the new FileStorage (must not exist), for the blob "
                      "files the lines name")
    _add_jobs(p)

    p = _command(
        commands, "pg-export", _pg_export, help="a FileStorage into zodb-pgjsonb's tables in PostgreSQL",
        description="Without --table: zodb-pgjsonb's own tables (transaction_log, object_state, blob_state; "
        "with --all also object_history and pack_state), into a database that has none of them, with COPY "
        "from every worker into a staging schema, moved into place in one transaction: on any failure "
        "nothing is left. zodb-pgjsonb's PGJsonbStorage opened on it "
        "(history_preserving with --all) serves the copy. With --table: one table of object rows "
        "(zoid, tid, class_mod, class_name, state jsonb, state_size, refs bigint[]) for SQL analysis; "
        "with --part, each part adds its rows to a table shared by the parts.",
    )
    _add_path(p, writes=True)
    _add_dsn(p)
    _add_blob_options(p, "the database's blob directory (ZODB does not record it in the Data.fs): each blob "
                      "revision's bytes go into blob_state")
    p.add_argument("--table", metavar="[SCHEMA.]TABLE",
                   help="write this one table of object rows instead (no transactions, no blobs): "
                   "object_state's columns, for SQL analysis")
    p.add_argument("--replace", action="store_true",
                   help="with --table: replace TABLE if it exists: the new table is built beside it and swapped "
                   "in at the commit, so readers see the old one until then")
    _add_scan_options(p, " (history-preserving: earlier revisions into object_history; with --table, the "
                      "table is keyed by zoid and tid)")

    p = _command(
        commands, "pg-import", _pg_import, help="zodb-pgjsonb's tables (or a pg-export --table) into a new FileStorage",
        description="Read every transaction of transaction_log and every revision of object_state and "
        "object_history (where there is one) in tid order, with their blobs from blob_state, and write them, "
        "encoded back, into a new FileStorage with their oids and tids. With --table: the rows of that "
        "one table. The new file appears only when complete.",
    )
    p.add_argument("output", metavar="OUT.fs", help="the FileStorage to create (must not exist)")
    _add_dsn(p)
    _add_blob_options(p, "the blob directory to create for the new FileStorage (must not exist), for blob_state's "
                      "bytes")
    p.add_argument("--table", metavar="[SCHEMA.]TABLE",
                   help="read this one table (as pg-export --table writes it) instead of zodb-pgjsonb's tables")
    _add_jobs(p)

    p = _command(
        commands, "verify", _verify, help="prove that every record survives the codec, or that a copy equals its original",
        description="Without --against: decode every record revision, encode it back (from the dict, from "
        "the JSON text and, with --pg, from the text after a jsonb column) and compare the object graphs "
        "with the original, without importing application classes. With --against ORIGINAL: every "
        "record of PATH must hold the same objects (and blob bytes) as ORIGINAL's record of that oid and tid, "
        "every revision without data must be one in ORIGINAL, every transaction must have ORIGINAL's "
        "metadata, and every current object of ORIGINAL (every revision and transaction, with --all) "
        "must be in PATH. "
        "Exits 1 if any record is lost, different, missing or cannot be decoded.",
    )
    _add_path(p, writes=False)
    check = p.add_mutually_exclusive_group()
    check.add_argument("--pg", metavar="DSN", help="also send every state through a jsonb column of this PostgreSQL")
    check.add_argument("--against", metavar="ORIGINAL", help="compare PATH, a copy (load, pg-import), with ORIGINAL")
    _add_blob_options(p, "PATH's blob directory (with --against: the blob files are compared too)")
    p.add_argument("--original-blob-dir", metavar="DIR", help="ORIGINAL's blob directory")
    p.add_argument("--show", type=int, default=MAX_FAILURES_SHOWN, metavar="N",
                   help="list up to N failures (default %(default)s)")
    _add_scan_options(p, " (with --against)")

    p = _command(
        commands, "stats", _stats, help="records per class, with pickle and JSON sizes; or the globals named",
        description="A table of the classes in a FileStorage, most records first: records, pickle bytes "
        "and bytes of state JSON text, and a total line. With --globals: every global the database names "
        "(a FileStorage's records, or a jsonb table's rows with --pg), by role, with its records, an example "
        "oid and what each mode of the globals policy decides (docs/security.md); rows the standard mode "
        "refuses are listed (in a table the codec wrote, someone edited them). Exits 1 if standard refuses "
        "any record.",
    )
    _add_path(p, writes=False)
    _add_scan_options(p, "")
    p.add_argument("--globals", action="store_true", help="the globals the records name, not the classes' sizes")
    p.add_argument("--pg", metavar="DSN", help="with --globals: read the rows of a jsonb table of this PostgreSQL")
    p.add_argument("--table", default="object_state", help="with --pg: the table (default %(default)s)")
    p.add_argument("--write-allowlist", metavar="FILE",
                   help="with --globals: write the allowlist lines the strict mode needs to FILE (a new file)")
    return parser


# Handlers: one per command, bound to its sub-parser with set_defaults(handler=...).
# Each imports its _db module when it runs, so that --help needs neither ZODB nor psycopg.

def _dump(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ._db.jsonl import dump

    out.flush()
    return dump(args.path, args.output, stdout=out.buffer, err=err, jobs=args.jobs, part=args.part,  # UTF-8 bytes
                all_revisions=args.all_revisions, blob_dir=args.blob_dir, no_blobs=args.no_blobs, force=args.force)


def _load(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ._db.jsonl import load

    return load(args.source, args.output, out=out, err=err, stdin=sys.stdin.buffer, jobs=args.jobs,
                blob_dir=args.blob_dir, no_blobs=args.no_blobs)


def _pg_export(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.table is None:
        from ._db.pgjsonb import export_layout

        if args.replace or args.part:
            raise CommandError("--replace and --part go with --table (zodb-pgjsonb's tables are written whole)")
        return export_layout(args.path, dsn=args.dsn, out=out, err=err, all_revisions=args.all_revisions,
                             blob_dir=args.blob_dir, no_blobs=args.no_blobs, jobs=args.jobs)
    from ._db.pg import export

    if args.blob_dir or args.no_blobs:
        raise CommandError("the blob options go without --table (a --table export holds no blobs)")
    return export(args.path, args.table, dsn=args.dsn, out=out, err=err, all_revisions=args.all_revisions,
                  part=args.part, jobs=args.jobs, replace=args.replace)


def _pg_import(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.table is None:
        from ._db.pgjsonb import import_layout

        return import_layout(args.output, dsn=args.dsn, out=out, err=err, blob_dir=args.blob_dir,
                             no_blobs=args.no_blobs, jobs=args.jobs)
    from ._db.pg import import_

    if args.blob_dir or args.no_blobs:
        raise CommandError("the blob options go without --table (a --table export holds no blobs)")
    return import_(args.table, args.output, dsn=args.dsn, out=out, err=err, jobs=args.jobs)


def _verify(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ._db.verify import verify, verify_against

    options = dict(out=out, err=err, show=args.show, jobs=args.jobs, part=args.part)
    if args.against is not None:
        return verify_against(args.path, args.against, all_revisions=args.all_revisions, blob_dir=args.blob_dir,
                              original_blob_dir=args.original_blob_dir, no_blobs=args.no_blobs, **options)
    if args.all_revisions:
        raise CommandError("--all goes with --against (without it, verify checks every revision anyway)")
    if args.blob_dir or args.original_blob_dir or args.no_blobs:
        raise CommandError("the blob options go with --against")
    return verify(args.path, dsn=args.pg, **options)


def _stats(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.globals:
        from ._db.audit import audit_globals

        if args.pg is not None and args.path is not None:
            raise CommandError("give PATH or --pg, not both")
        return audit_globals(args.path, out=out, err=err, dsn=args.pg, table=args.table, jobs=args.jobs,
                             part=args.part, all_revisions=args.all_revisions, write_allowlist=args.write_allowlist)
    if args.pg is not None or args.write_allowlist is not None:
        raise CommandError("--pg and --write-allowlist go with --globals")
    from ._db.stats import stats

    return stats(args.path, out=out, err=err, jobs=args.jobs, part=args.part, all_revisions=args.all_revisions)


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """Run the command the arguments name, through the handler its sub-parser bound."""
    _check_path(args, err)
    if getattr(args, "jobs", 0) is None and args.command != "pg-import":
        args.jobs = auto_jobs(args.command, _input_size(args))
    return args.handler(args, out, err)


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before a command ran, or after it
        print("zodb-json-codec: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130


def _main(argv: Optional[Sequence[str]]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    err = sys.stderr
    # The commands check what matters (a truncated file, say) and report it
    # in one line; ZODB's own log warnings would only repeat it.
    logging.getLogger("ZODB").addHandler(logging.NullHandler())
    try:
        return run(args, sys.stdout, err)
    except CommandError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog} {args.command}: interrupted; nothing half-written was kept", file=err)
        return 130
    except BrokenPipeError:
        # The reader went away (dump | head): stop quietly with the status of a process SIGPIPE ended, as cat
        # does (exit 1 would say the data has problems).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE if hasattr(signal, "SIGPIPE") else 1
    except OSError as exc:  # a full disk, a file that cannot be written: one line, as any refusal
        print(f"{parser.prog} {args.command}: error: {exc}", file=err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
