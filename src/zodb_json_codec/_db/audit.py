"""``stats --globals``: every global a database names, by role, and what each mode of the policy decides.

A FileStorage's records are decoded; a PostgreSQL table's rows are read as the
encoders would read them back.  For each global: its role, the records naming
it, an example oid, and the verdict of ``standard``, ``strict-calls`` and
``strict`` (with the allowlist files of ZODB_JSON_CODEC_GLOBALS_ALLOW).  Rows
``standard`` refuses are listed by oid: in a jsonb table nothing the codec
wrote is refused, so someone edited them.  ``--write-allowlist FILE`` writes
the lines ``strict`` needs.
"""

from __future__ import annotations

import base64
import os
import tempfile
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import zodb_json_codec as codec

from .. import _globals
from .._jsonread import read_json
from . import CommandError
from .parallel import map_records
from .progress import Progress
from .storage import Part, open_storage, records

MODES = ("standard", "strict-calls", "strict")
UNDECODABLE = "(not decodable)"

# (role, dotted) -> [records, example oid, refused by each of MODES, a reason of the strictest refusal]
Found = Dict[Tuple[str, str], List[Any]]
Refusal = Tuple[str, str, str, str]  # (oid, role, dotted, reason) of a record standard refuses

_policies: Optional[Dict[str, codec.GlobalsPolicy]] = None


def policies() -> Dict[str, codec.GlobalsPolicy]:
    """The three modes, each with the environment's allowlist files (built once a process)."""
    global _policies
    if _policies is None:
        files = [f for f in os.environ.get(_globals.ALLOW_VARIABLE, "").split(os.pathsep) if f.strip()]
        _policies = {mode: codec.GlobalsPolicy(mode, files=files) for mode in MODES}
    return _policies


def named_in(record_class: Tuple[str, str], state: Any) -> Iterator[Tuple[str, str, str, Any, bool]]:
    """(role, module, name, args, method) of each global a record names, a verbatim one's (@pkl) as CALLs."""
    if type(state) is dict and len(state) == 1 and type(state.get("@pkl")) is str:
        for module, name in _globals.pickle_globals(base64.b64decode(state["@pkl"])):
            yield _globals.CALL, module, name, None, False
        return
    for named in _globals.globals_named(state, record_class if any(record_class) else None):
        yield named.role, named.module, named.name, named.args, named.method


def add_record(found: Found, refusals: List[Refusal], oid: str,
               names: Iterable[Tuple[str, str, str, Any, bool]]) -> None:
    """Count one record's globals (each once per record) into found; a refusal of standard into refusals."""
    seen = set()
    modes = policies()
    for role, module, name, args, method in names:
        dotted = f"{module}.{name}" if module else name
        verdicts = [modes[mode].decision(role, module, name, args, method) for mode in MODES]
        entry = found.get((role, dotted))
        if entry is None:
            entry = found[(role, dotted)] = [0, oid, 0, 0, 0, None]
        if (role, dotted) not in seen:
            seen.add((role, dotted))
            entry[0] += 1
            for i, verdict in enumerate(verdicts):
                entry[2 + i] += verdict is not None
        reason = next((v for v in reversed(verdicts) if v is not None), None)
        if reason is not None and entry[5] is None:
            entry[5] = reason
        if verdicts[0] is not None:
            refusals.append((oid, role, dotted, verdicts[0]))


def audit_batch(batch: Sequence[Tuple[bytes, bytes, bytes]]) -> Tuple[Found, List[Refusal]]:
    """The globals of a batch of FileStorage records (a worker's share)."""
    found: Found = {}
    refusals: List[Refusal] = []
    for oid, _, data in batch:
        try:
            record = codec.decode_zodb_record(data)
            names = list(named_in(tuple(record["@cls"]), record["@s"]))
        except ValueError as exc:
            found.setdefault(("-", UNDECODABLE), [0, oid.hex(), 0, 0, 0, str(exc)[:80]])[0] += 1
            continue
        add_record(found, refusals, oid.hex(), names)
    return found, refusals


def merge(total: Found, part: Found) -> None:
    for key, entry in part.items():
        mine = total.get(key)
        if mine is None:
            total[key] = list(entry)
        else:
            for i in (0, 2, 3, 4):
                mine[i] += entry[i]
            mine[5] = mine[5] or entry[5]


def file_globals(source: Optional[str], err: IO[str], jobs: int, part: Optional[Part],
                 all_revisions: bool) -> Tuple[Found, List[Refusal]]:
    found: Found = {}
    refusals: List[Refusal] = []
    progress = Progress("stats", err)
    with open_storage(source) as storage:
        try:
            for batch_found, batch_refusals in map_records(records(storage, all_revisions, part), audit_batch,
                                                           jobs, progress):
                merge(found, batch_found)
                refusals.extend(batch_refusals)
        finally:
            progress.close()
    return found, refusals


def table_globals(dsn: str, table: str) -> Tuple[Found, List[Refusal]]:
    """The globals of a jsonb table's rows, read as the encoders read them back."""
    from psycopg import sql

    from .pg import connect, table_exists, table_identifier

    found: Found = {}
    refusals: List[Refusal] = []
    with connect(dsn) as conn:
        if not table_exists(conn, table):
            raise CommandError(f"no table {table} in that database")
        query = sql.SQL("SELECT zoid, class_mod, class_name, state::text FROM {}").format(table_identifier(table))
        with conn.transaction(), conn.cursor(name="zodb_json_codec_audit") as cursor:  # a server-side cursor
            cursor.itersize = 2000
            cursor.execute(query)
            for zoid, module, name, text in cursor:
                oid = (zoid % (1 << 64)).to_bytes(8, "big").hex()
                try:
                    names = list(named_in((module, name), read_json(text)))
                except ValueError as exc:
                    found.setdefault(("-", UNDECODABLE), [0, oid, 0, 0, 0, str(exc)[:80]])[0] += 1
                    continue
                add_record(found, refusals, oid, names)
    return found, refusals


def allowlist_lines(found: Found) -> List[str]:
    """The lines strict needs: each global it refuses that a line can allow."""
    strict = policies()["strict"]
    lines = []
    for (role, dotted), entry in sorted(found.items()):
        if role == "-" or not entry[4]:
            continue
        module, _, name = dotted.rpartition(".")
        lifted = codec.GlobalsPolicy("strict", allow=[f"{role} {dotted}"])
        method = "." in name  # a getattr call's "Class.method": GLOBAL names have no dot
        if (lifted.decision(role, module, name, method=method) is None
                and strict.decision(role, module, name, method=method) is not None):
            lines.append(f"{role} {dotted}")
    return lines


def write_new_file(path: str, text: str) -> None:
    """path, written whole or not at all; an existing file is never replaced."""
    if os.path.exists(path):
        raise CommandError(f"{path} exists: give a new file to --write-allowlist")
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".allowlist-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.link(temporary, path)  # fails if path appeared meanwhile: nothing replaced
    finally:
        os.unlink(temporary)


def audit_globals(source: Optional[str], *, out: IO[str], err: IO[str], dsn: Optional[str] = None,
                  table: str = "object_state", jobs: int = 1, part: Optional[Part] = None,
                  all_revisions: bool = False, write_allowlist: Optional[str] = None, show: int = 20) -> int:
    """Print the table of globals; 1 if standard refuses any record (or one cannot be read), else 0."""
    if dsn is not None:
        found, refusals = table_globals(dsn, table)
    else:
        found, refusals = file_globals(source, err, jobs, part, all_revisions)
    print(f"{'records':>9}  {'role':<6} {'standard':<9} {'strict-calls':<13} {'strict':<9} {'example oid':<18} global",
          file=out)
    for (role, dotted), entry in sorted(found.items(), key=lambda item: (-item[1][0], item[0])):
        verdicts = ["refused" if entry[2 + i] else "ok" for i in range(3)]
        print(f"{entry[0]:>9}  {role:<6} {verdicts[0]:<9} {verdicts[1]:<13} {verdicts[2]:<9} {entry[1]:<18} {dotted}",
              file=out)
    counts = [sum(1 for entry in found.values() if entry[2 + i]) for i in range(3)]
    print(f"{len(found)} globals; refused by standard: {counts[0]}, strict-calls: {counts[1]}, strict: {counts[2]}",
          file=out)
    if refusals:
        what = "rows someone has edited" if dsn is not None else "records"
        print(f"{len(set(r[0] for r in refusals))} {what} that standard refuses:", file=out)
        for oid, role, dotted, reason in refusals[:show]:
            print(f"  oid {oid}: {role} {dotted}: {reason}", file=out)
    if write_allowlist is not None:
        lines = allowlist_lines(found)
        write_new_file(write_allowlist, "".join(f"{line}\n" for line in lines))
        print(f"wrote {len(lines)} lines to {write_allowlist}", file=err)
    return 1 if refusals or ("-", UNDECODABLE) in found else 0
