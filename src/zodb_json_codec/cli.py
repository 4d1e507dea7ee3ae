"""The ``zodb-json-codec`` command line: dump a FileStorage as JSON Lines, or verify the codec on it.

Without a PATH both commands use a small sample database shipped in the
package.  Reading FileStorages needs ZODB (``pip install "zodb-json-codec[cli]"``);
it is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import IO, Any, Callable, Dict, Iterator, Optional, Sequence

import zodb_json_codec as codec

SAMPLE_NAME = "sample.fs"
MAX_FAILURES_SHOWN = 10


class CommandError(Exception):
    """A problem to report in one line, without a traceback."""


def _import_zodb() -> Any:
    try:
        from ZODB.FileStorage import FileStorage
    except ImportError as exc:
        raise CommandError(
            f"this command needs ZODB to read FileStorages ({exc}); "
            'install it with: pip install "zodb-json-codec[cli]"'
        ) from None
    return FileStorage


@contextlib.contextmanager
def _sample_path() -> Iterator[str]:
    from importlib.resources import as_file, files

    with as_file(files(__package__) / SAMPLE_NAME) as path:
        yield str(path)


@contextlib.contextmanager
def open_storage(path: Optional[str]) -> Iterator[Any]:
    """A read-only FileStorage of path, or of the shipped sample when path is None."""
    FileStorage = _import_zodb()
    with contextlib.ExitStack() as stack:
        if path is None:
            path = stack.enter_context(_sample_path())
        if not os.path.exists(path):
            raise CommandError(f"no such file: {path}")
        if not os.path.isfile(path):
            raise CommandError(f"not a file: {path}")
        try:
            storage = FileStorage(path, read_only=True)
        except Exception as exc:  # noqa: BLE001 - any reason the file cannot be read as a FileStorage
            raise CommandError(f"cannot open {path} as a FileStorage: {type(exc).__name__}: {exc}") from None
        stack.callback(storage.close)
        yield storage


# ---------------------------------------------------------------------------
# dump
# ---------------------------------------------------------------------------


def current_records(storage: Any) -> Iterator[tuple]:
    """(oid, tid, data) of the current revision of every object, in oid order."""
    from ZODB.POSException import POSKeyError
    from ZODB.utils import p64, u64

    next_oid = None
    while True:
        try:
            oid, tid, data, next_oid = storage.record_iternext(next_oid)
        except POSKeyError as exc:  # an object whose creation was undone has no current data
            next_oid = p64(u64(exc.args[0]) + 1)
            continue
        except ValueError:  # no object at or after next_oid (an empty storage included)
            return
        if data:
            yield oid, tid, data
        if next_oid is None:
            return


def dump_line(oid: bytes, tid: bytes, data: bytes) -> str:
    """One JSON line; the codec's state JSON text is written as is, not parsed again."""
    module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(data)
    return (
        f'{{"oid":"{oid.hex()}","tid":"{tid.hex()}",'
        f'"class":{json.dumps(f"{module}.{name}")},'
        f'"state":{state_json},"refs":[{",".join(str(int(r)) for r in refs)}]}}\n'
    )


def dump(path: Optional[str], out: IO[str], err: IO[str]) -> int:
    failed = 0
    with open_storage(path) as storage:
        for oid, tid, data in current_records(storage):
            try:
                line = dump_line(oid, tid, data)
            except Exception as exc:  # noqa: BLE001 - report the record and go on
                failed += 1
                print(f"dump: oid {oid.hex()}: cannot decode: {type(exc).__name__}: {exc}"[:500], file=err)
                continue
            out.write(line)
    if failed:
        print(f"dump: {failed} records could not be decoded", file=err)
        return 1
    return 0


# ---------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------


def all_records(storage: Any) -> Iterator[tuple]:
    """(oid, tid, data) of every record revision that has data."""
    for txn in storage.iterator():
        for rec in txn:
            if rec.data:
                yield rec.oid, rec.tid, rec.data


def _reencoding_problem(want: Any, reencode: Callable[[], bytes]) -> Optional[str]:
    """None when reencode() gives a record that loads to want, else why not."""
    from ._fidelity import load_record, same

    try:
        again = reencode()
    except Exception as exc:  # noqa: BLE001 - any failure to re-encode loses the record
        return f"encoding raised {type(exc).__name__}: {exc}"
    try:
        got = load_record(again)
    except Exception as exc:  # noqa: BLE001
        return f"the re-encoded record does not load: {type(exc).__name__}: {exc}"
    if not same(want, got):
        return "the re-encoded record holds different objects"
    return None


def verify_record(data: bytes) -> Dict[str, str]:
    """What is wrong with the codec on one record: {kind: reason}, empty when all is well.

    Kinds: "undecodable" (the codec cannot decode it; nothing else is
    checked), "unchecked" (the original cannot be loaded for comparison),
    "dict path", "json path" (re-encoded, it holds other objects) and
    "refs" (refs lack a reference ZODB finds).
    """
    from ZODB.serialize import referencesf
    from ZODB.utils import u64

    from ._fidelity import load_record

    try:
        decoded = codec.decode_zodb_record(data)
        module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(data)
    except Exception as exc:  # noqa: BLE001 - anything but success is a failure to decode
        return {"undecodable": f"{type(exc).__name__}: {exc}"}
    problems: Dict[str, str] = {}
    try:
        # The original may need its writer's memo numbering to load at all;
        # the codec's output must load as ZODB reads records.
        want = load_record(data, as_written=True)
    except Exception as exc:  # noqa: BLE001 - no comparison can mean anything then
        problems["unchecked"] = f"the original does not load for comparison: {type(exc).__name__}: {exc}"
    else:
        for kind, reencode in (
            ("dict path", lambda: codec.encode_zodb_record(decoded)),
            ("json path", lambda: codec.encode_zodb_record({"@cls": [module, name], "@s": json.loads(state_json)})),
        ):
            problem = _reencoding_problem(want, reencode)
            if problem is not None:
                problems[kind] = problem
    try:
        wanted = {u64(oid) for oid in referencesf(data)}
    except Exception:  # noqa: BLE001 - ZODB itself cannot read this record's references
        wanted = set()
    missing = sorted(wanted - set(refs))
    if missing:
        problems["refs"] = f"refs {list(refs)} lack {missing}"
    return problems


def verify(path: Optional[str], out: IO[str], err: IO[str], show: int = MAX_FAILURES_SHOWN) -> int:
    records = failed = 0
    counts = dict.fromkeys(("dict path", "json path", "undecodable", "refs", "unchecked"), 0)
    lost = 0
    with open_storage(path) as storage:
        for oid, tid, data in all_records(storage):
            records += 1
            problems = verify_record(data)
            for kind in problems:
                counts[kind] += 1
            lost += "dict path" in problems or "json path" in problems
            if problems:
                failed += 1
                if failed <= show:
                    for kind, reason in problems.items():
                        print(f"  oid {oid.hex()} tid {tid.hex()}: {kind}: {reason}"[:500], file=err)
    if failed > show:
        print(f"  ... and {failed - show} more records with problems", file=err)
    checked = records - counts["undecodable"] - counts["unchecked"]
    summary = (
        f"verify: {records} records, {checked - counts['dict path']} same (dict path), "
        f"{checked - counts['json path']} same (json path), {lost} lost"
    )
    for kind, label in (("undecodable", "not decodable"), ("refs", "with incomplete refs"), ("unchecked", "not comparable")):
        if counts[kind]:
            summary += f", {counts[kind]} {label}"
    print(summary, file=out)
    return 1 if failed else 0


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zodb-json-codec",
        description="Convert ZODB records to JSON (for PostgreSQL jsonb) and back.",
        epilog="Without PATH, the commands use a small sample database shipped with the package.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {codec.__version__} ({codec.IMPLEMENTATION})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = commands.add_parser(
        "dump",
        help="write the current revision of every object as JSON Lines",
        description='One line per object: {"oid", "tid", "class", "state", "refs"}, '
        "state as decode_zodb_record_for_pg_json writes it.",
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="a FileStorage (.fs), opened read-only")
    p.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of standard output")

    p = commands.add_parser(
        "verify",
        help="check that every record revision survives decode and encode",
        description="Decode every record revision, encode it back (from the dict and from the JSON text) "
        "and compare the object graphs with the original, without importing application classes. "
        "Exits 1 if any record is lost or cannot be decoded.",
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="a FileStorage (.fs), opened read-only")
    p.add_argument(
        "--show", type=int, default=MAX_FAILURES_SHOWN, metavar="N", help="list up to N failures (default %(default)s)"
    )
    return parser


def _utf8(stream: IO[str]) -> IO[str]:
    # JSON Lines are UTF-8 whatever the locale says.
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(encoding="utf-8")
    return stream


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    err = sys.stderr
    try:
        if args.command == "dump":
            if args.output:
                with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                    return dump(args.path, out, err)
            return dump(args.path, _utf8(sys.stdout), err)
        return verify(args.path, sys.stdout, err, show=args.show)
    except CommandError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=err)
        return 2
    except BrokenPipeError:
        # The reader went away (dump | head): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
