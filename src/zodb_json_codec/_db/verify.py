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
from .storage import Part, open_storage, records

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

    def add(self, where: str, problems: Dict[str, str]) -> None:
        self.records += 1
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


def verify_against(source: str, original: str, *, out: IO[str], err: IO[str], show: int = MAX_FAILURES_SHOWN,
                   jobs: int = 1, part: Optional[Part] = None, all_revisions: bool = False) -> int:
    """Does the FileStorage source (a copy) hold the same objects as original, record for record?

    Every record revision of source must load to the same objects as the
    original's revision of the same oid and tid; every object of the
    original (every revision, with all_revisions) must be in source, current
    at the same tid.
    """
    from ZODB.POSException import POSKeyError

    failures = Failures(err, show)
    progress = Progress("verify", err)
    with open_storage(source) as copy, open_storage(original) as original_storage:

        def with_original(rec: Any) -> Tuple[bytes, bytes, bytes, Optional[bytes]]:
            try:
                return rec.oid, rec.tid, rec.data, original_storage.loadSerial(rec.oid, rec.tid)
            except POSKeyError:
                return rec.oid, rec.tid, rec.data, None

        try:
            for results in map_records(records(copy, True, part), compare_batch, jobs, progress, prepare=with_original):
                for where, problems in results:
                    failures.add(where, problems)
        finally:
            progress.close()
        missing = 0
        for rec in records(original_storage, all_revisions, part):
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
                             {"missing": f"the original's revision is not {where}"})
    failures.close()
    kinds = failures.kinds
    compared = failures.records - missing
    unlike = sum(kinds.get(kind, 0) for kind in ("different", "extra", "unchecked"))
    print(
        f"verify: {compared} records compared with {original}: {compared - unlike} same, "
        f"{kinds.get('different', 0)} different, {kinds.get('extra', 0)} not in the original, "
        f"{missing} missing" + (f", {kinds['unchecked']} not comparable" if kinds.get("unchecked") else ""),
        file=out,
    )
    return 1 if failures.failed else 0

