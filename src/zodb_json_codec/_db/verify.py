"""Proof that nothing is lost: every record through the codec (and a jsonb column), or a copy against its original.

Workers compare object graphs with ``fidelity`` (no application classes
are imported); the main process only reads storages and counts.
"""

from __future__ import annotations

from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

import zodb_json_codec as codec
from zodb_json_codec._jsonread import read_json

from . import MAX_MESSAGE, CommandError, record_name
from .parallel import map_records
from .pg import first_line
from .progress import Progress
from .blobs import file_digest, is_blob_record
from .storage import Part, Transaction, entries, open_storage, records, transaction_headers

MAX_FAILURES_SHOWN = 10
LOSSES = ("dict path", "json path", "pg path")  # a record that comes back as other objects

# The worker's PostgreSQL connection for `verify --pg` (one per process).
_pg_connection: Any = None


def init_worker(dsn: Optional[str]) -> None:
    global _pg_connection
    if dsn is not None:
        import psycopg

        _pg_connection = psycopg.connect(dsn, autocommit=True)


def _reencoding_problem(want: Any, reencode: Callable[[], bytes]) -> Optional[str]:
    """None when reencode() gives a record that loads to want, else why not."""
    from .fidelity import load_record, same

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


def _through_jsonb(texts: Sequence[str]) -> List[Any]:
    """Each text after a round trip through a jsonb column: the text, or the error PostgreSQL gave."""
    import psycopg

    query = "SELECT j::jsonb::text FROM unnest(%s::text[]) WITH ORDINALITY AS u(j, n) ORDER BY n"
    try:
        try:
            return [row[0] for row in _pg_connection.execute(query, (list(texts),)).fetchall()]
        except psycopg.DataError:  # one text is refused: find which, one by one
            out: List[Any] = []
            for text in texts:
                try:
                    out.append(_pg_connection.execute("SELECT %s::jsonb::text", (text,)).fetchone()[0])
                except psycopg.DataError as exc:
                    out.append(exc)
            return out
    except psycopg.Error as exc:  # the server went away, or the like: no record can be checked
        raise CommandError(f"PostgreSQL: {first_line(exc)}") from None


def _decode(data: bytes) -> Any:
    """(decode_zodb_record, decode_zodb_record_for_pg_json) of a record, or the exception decoding raised."""
    try:
        return codec.decode_zodb_record(data), codec.decode_zodb_record_for_pg_json(data)
    except Exception as exc:  # noqa: BLE001 - anything but success is a failure to decode
        return exc


def verify_record(data: bytes, decoded: Any, stored: Any = None) -> Dict[str, str]:
    """What is wrong with the codec on one record, decoded by _decode: {kind: reason}, empty when all is well.

    Kinds: "undecodable" (the codec cannot decode it; nothing else is
    checked), "unchecked" (the original cannot be loaded for comparison),
    "dict path", "json path", "pg path" (re-encoded, it holds other objects;
    the pg path starts from ``stored``, the state text after a jsonb
    column, when given) and "refs" (refs lack a reference ZODB finds).
    """
    from ZODB.serialize import referencesf
    from ZODB.utils import u64

    from .fidelity import load_record

    if isinstance(decoded, Exception):
        return {"undecodable": f"{type(decoded).__name__}: {decoded}"}
    decoded, (module, name, state_json, refs) = decoded
    problems: Dict[str, str] = {}
    try:
        # The original may need its writer's memo numbering to load at all;
        # the codec's output must load as ZODB reads records.
        want = load_record(data, as_written=True)
    except Exception as exc:  # noqa: BLE001 - no comparison can mean anything then
        problems["unchecked"] = f"the original does not load for comparison: {type(exc).__name__}: {exc}"
    else:
        paths = [
            ("dict path", lambda: codec.encode_zodb_record(decoded)),
            ("json path", lambda: codec.encode_zodb_record({"@cls": [module, name], "@s": read_json(state_json)})),
        ]
        if isinstance(stored, Exception):
            problems["pg path"] = f"PostgreSQL refused the state: {first_line(stored)}"
        elif stored is not None:
            paths.append(("pg path", lambda: codec.encode_zodb_record({"@cls": [module, name], "@s": read_json(stored)})))
        for kind, reencode in paths:
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


def verify_batch(batch: Sequence[Tuple[bytes, bytes, bytes]]) -> List[Tuple[str, Dict[str, str]]]:
    """(where, problems) for each record of a batch; with --pg, one jsonb round trip for all its states."""
    decoded = [_decode(data) for _, _, data in batch]
    stored: List[Any] = [None] * len(batch)
    if _pg_connection is not None:
        # An undecodable record sends "null": verify_record reports it without looking at what comes back.
        stored = _through_jsonb(["null" if isinstance(d, Exception) else d[1][2] for d in decoded])
    return [(record_name(oid, tid), verify_record(data, d, text))
            for (oid, tid, data), d, text in zip(batch, decoded, stored)]


class Failures:
    """Counts problems by kind and lists the first few on err."""

    def __init__(self, err: IO[str], show: int) -> None:
        self.err = err
        self.show = show
        self.records = 0
        self.failed = 0
        self.lost = 0
        self.kinds: Dict[str, int] = {}

    def add(self, where: str, problems: Dict[str, str], record: bool = True) -> None:
        """A record's problems (none: it was fine); record False: a transaction's, not counted as a record."""
        self.records += record
        for kind in problems:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.lost += any(kind in problems for kind in LOSSES)
        if problems:
            self.failed += 1
            if self.failed <= self.show:
                for kind, reason in problems.items():
                    print(f"  {where}: {kind}: {reason}"[:MAX_MESSAGE], file=self.err)

    def close(self) -> None:
        if self.failed > self.show:
            print(f"  ... and {self.failed - self.show} more records with problems", file=self.err)


def verify(source: Optional[str], *, out: IO[str], err: IO[str], show: int = MAX_FAILURES_SHOWN, jobs: int = 1,
           part: Optional[Part] = None, dsn: Optional[str] = None) -> int:
    """Every record revision of the FileStorage source through the codec's dict and JSON paths
    (and a jsonb column with dsn)."""
    if dsn is not None:
        from .pg import connect

        with connect(dsn):  # unreachable: one clear message before any work
            pass
    failures = Failures(err, show)
    progress = Progress("verify", err)
    with open_storage(source) as storage:
        try:
            for results in map_records(records(storage, True, part), verify_batch, jobs, progress,
                                       initializer=init_worker, initargs=(dsn,)):
                for where, problems in results:
                    failures.add(where, problems)
        finally:
            progress.close()
    failures.close()
    counts = failures.kinds
    checked = failures.records - counts.get("undecodable", 0) - counts.get("unchecked", 0)
    summary = f"verify: {failures.records} records, {checked - counts.get('dict path', 0)} same (dict path), "
    summary += f"{checked - counts.get('json path', 0)} same (json path)"
    if dsn is not None:
        summary += f", {checked - counts.get('pg path', 0)} same (pg path)"
    summary += f", {failures.lost} lost"
    for kind, label in (("undecodable", "not decodable"), ("refs", "with incomplete refs"), ("unchecked", "not comparable")):
        if counts.get(kind):
            summary += f", {counts[kind]} {label}"
    print(summary, file=out)
    return 1 if failures.failed else 0


# ---------------------------------------------------------------------------
# verify --against ORIGINAL
# ---------------------------------------------------------------------------


def compare_batch(batch: Sequence[Tuple[bytes, bytes, bytes, Optional[bytes]]]) -> List[Tuple[str, Dict[str, str]]]:
    """(where, problems) for each (oid, tid, record, the original's record of that oid and tid)."""
    from .fidelity import load_record, same

    results = []
    for oid, tid, data, original in batch:
        where = record_name(oid, tid)
        if original is None:
            results.append((where, {"extra": "the original has no such revision"}))
            continue
        if data == original:  # the same bytes: the same objects, nothing to load
            results.append((where, {}))
            continue
        try:
            want = load_record(original, as_written=True)
        except Exception as exc:  # noqa: BLE001
            results.append((where, {"unchecked": f"the original does not load: {type(exc).__name__}: {exc}"}))
            continue
        try:
            same_objects = same(want, load_record(data))
        except Exception as exc:  # noqa: BLE001
            results.append((where, {"different": f"does not load: {type(exc).__name__}: {exc}"}))
            continue
        results.append((where, {} if same_objects else {"different": "holds different objects than the original"}))
    return results


def _extension_value(raw: bytes) -> Any:
    if not raw:
        return {}
    try:
        return codec.pickle_to_dict(raw)
    except ValueError:
        return raw


class _Headers:
    """The original's transaction headers, walked beside the copy's (both in tid order)."""

    def __init__(self, storage: Any, failures: Any, every: bool) -> None:
        self._headers = transaction_headers(storage)
        self._next: Optional[Transaction] = next(self._headers, None)
        self._failures = failures
        self._every = every  # every transaction of the original must be in the copy
        self.compared = 0
        self.different = 0
        self.missing = 0

    def _skip_to(self, tid: Optional[bytes]) -> None:
        while self._next is not None and (tid is None or self._next.tid < tid):
            if self._every:
                self._failures.add(f"transaction {self._next.tid.hex()}", {"missing": "not in the copy"}, False)
                self.missing += 1
            self._next = next(self._headers, None)

    def compare(self, header: Transaction) -> None:
        self._skip_to(header.tid)
        self.compared += 1
        where = f"transaction {header.tid.hex()}"
        if self._next is None or self._next.tid != header.tid:
            self._failures.add(where, {"extra": "the original has no such transaction"}, False)
            self.different += 1
            return
        want, self._next = self._next, next(self._headers, None)
        unlike = [name for name in ("status", "user", "description") if getattr(want, name) != getattr(header, name)]
        if want.extension != header.extension and _extension_value(want.extension) != _extension_value(header.extension):
            unlike.append("extension")
        if unlike:
            self._failures.add(where, {"metadata": f"differs from the original's: {', '.join(unlike)}"}, False)
            self.different += 1

    def finish(self) -> None:
        self._skip_to(None)


def _no_data_at(storage: Any, oid: bytes, tid: bytes) -> Optional[bool]:
    """Whether storage's object oid has no data at tid (a revision without data there): True; False where it
    has data; None where it does not exist yet."""
    from ZODB.POSException import POSKeyError
    from ZODB.utils import p64, u64

    try:
        return None if storage.loadBefore(oid, p64(u64(tid) + 1)) is None else False
    except POSKeyError:
        return True


def _blob_problem(copy: Any, original: Any, oid: bytes, tid: bytes) -> Dict[str, str]:
    """The copy's blob file of a record against the original's: the same bytes, or what differs."""
    found = []
    for storage in (copy, original):
        try:
            found.append(file_digest(storage.loadBlob(oid, tid)))
        except Exception as exc:  # noqa: BLE001 - POSKeyError: no blob file; OSError
            found.append(f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE])
    if isinstance(found[0], str):
        return {"blob": f"the copy's blob file: {found[0]}"}
    if isinstance(found[1], str):
        return {"unchecked": f"the original's blob file: {found[1]}"}
    if found[0] != found[1]:
        return {"blob": f"the copy's blob file ({found[0][0]} bytes) differs from the original's ({found[1][0]} bytes)"}
    return {}


def verify_against(source: str, original: str, *, out: IO[str], err: IO[str], show: int = MAX_FAILURES_SHOWN,
                   jobs: int = 1, part: Optional[Part] = None, all_revisions: bool = False,
                   blob_dir: Optional[str] = None, original_blob_dir: Optional[str] = None,
                   no_blobs: bool = False) -> int:
    """Does the FileStorage source (a copy) hold the same objects as original, record for record?

    Every record revision of source must load to the same objects as the
    original's revision of the same oid and tid, with the same blob bytes;
    every revision without data must be one in the original too; every
    transaction must have the original's metadata.  Every object of the
    original (every revision and transaction, with all_revisions) must be in
    source, current at the same tid, or without data where the original's is.
    """
    from ZODB.POSException import POSKeyError

    if no_blobs and (blob_dir is not None or original_blob_dir is not None):
        raise CommandError("give the blob directories or --no-blobs, not both")
    failures = Failures(err, show)
    progress = Progress("verify", err)
    blobs = {"same": 0, "skipped": 0}
    with open_storage(source, blob_dir) as copy, open_storage(original, original_blob_dir) as original_storage:
        headers = _Headers(original_storage, failures, all_revisions and part is None)

        def with_original(rec: Any) -> Tuple[bytes, bytes, bytes, Optional[bytes]]:
            try:
                return rec.oid, rec.tid, rec.data, original_storage.loadSerial(rec.oid, rec.tid)
            except POSKeyError:
                return rec.oid, rec.tid, rec.data, None

        def copy_records() -> Any:
            """The copy's records with data, for the workers; headers, revisions without data and blob
            files checked here on the way."""
            for entry in entries(copy, True, part):
                if type(entry) is Transaction:
                    headers.compare(entry)
                elif not entry.data:
                    failures.add(record_name(entry.oid, entry.tid),
                                 {} if _no_data_at(original_storage, entry.oid, entry.tid)
                                 else {"different": "a revision without data, where the original has data"})
                else:
                    if is_blob_record(entry.data):
                        if no_blobs:
                            blobs["skipped"] += 1
                        elif blob_dir is None or original_blob_dir is None:
                            raise CommandError(f"{source} holds blob records: give --blob-dir DIR and "
                                               "--original-blob-dir DIR (the copy's and the original's blob "
                                               "directories), or --no-blobs to compare without the blob files")
                        else:
                            problem = _blob_problem(copy, original_storage, entry.oid, entry.tid)
                            if problem:  # the record itself is counted when compared
                                failures.add(record_name(entry.oid, entry.tid), problem, False)
                            else:
                                blobs["same"] += 1
                    yield entry

        try:
            for results in map_records(copy_records(), compare_batch, jobs, progress, prepare=with_original):
                for where, problems in results:
                    failures.add(where, problems)
            headers.finish()
        finally:
            progress.close()
        missing = 0
        for rec in entries(original_storage, all_revisions, part):
            if type(rec) is Transaction:
                continue
            if not rec.data:
                present = bool(_no_data_at(copy, rec.oid, rec.tid)) if all_revisions else _gone(copy, rec.oid)
            else:
                try:
                    if all_revisions:
                        copy.loadSerial(rec.oid, rec.tid)
                        present = True
                    else:
                        present = copy.getTid(rec.oid) == rec.tid
                except POSKeyError:
                    present = False
            if not present:
                missing += 1
                where = "in the copy" if all_revisions else "current in the copy"
                failures.add(record_name(rec.oid, rec.tid),
                             {"missing": f"the original's revision{' without data' if not rec.data else ''} "
                                         f"is not {where}"})
    failures.close()
    kinds = failures.kinds
    compared = failures.records - missing
    extra = kinds.get("extra", 0) - (headers.different - kinds.get("metadata", 0))  # records', not transactions'
    unlike = extra + sum(kinds.get(kind, 0) for kind in ("different", "unchecked"))
    print(
        f"verify: {compared} records compared with {original}: {compared - unlike} same, "
        f"{kinds.get('different', 0)} different, {extra} not in the original, {missing} missing"
        + (f", {kinds['unchecked']} not comparable" if kinds.get("unchecked") else "")
        + f"; {headers.compared} transactions compared: {headers.different} different, {headers.missing} missing"
        + f"; {blobs['same']} blob files same, {kinds.get('blob', 0)} different"
        + (f", {blobs['skipped']} not compared (--no-blobs)" if blobs["skipped"] else ""),
        file=out,
    )
    return 1 if failures.failed else 0


def _gone(storage: Any, oid: bytes) -> bool:
    """Whether storage's object oid has no current data (deleted, or its creation undone)."""
    from ZODB.POSException import POSKeyError

    try:
        storage.load(oid)
        return False
    except POSKeyError:
        return True
