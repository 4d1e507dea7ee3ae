"""JSON Lines, one object revision per line: records to lines (dump) and lines back to records (load).

A line is ``{"oid": HEX16, "tid": HEX16, "class_mod": ..., "class_name": ...,
"state": ..., "refs": [...]}``, the state exactly as
``decode_zodb_record_for_pg_json`` writes it.  Lines come in transaction
order, so ``load`` can rebuild a FileStorage in one pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import IO, Any, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import zodb_json_codec as codec
from zodb_json_codec._jsonread import read_json

from . import MAX_MESSAGE, CommandError, undecodable
from .parallel import map_records
from .progress import Progress
from .storage import Part, new_storage, open_storage, records


def dump_line(oid: bytes, tid: bytes, data: bytes) -> str:
    """One JSON line; the codec's state JSON text is written as is, not parsed again."""
    module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(data)
    return (
        f'{{"oid":"{oid.hex()}","tid":"{tid.hex()}",'
        f'"class_mod":{json.dumps(module)},"class_name":{json.dumps(name)},'
        f'"state":{state_json},"refs":[{",".join(map(str, refs))}]}}\n'
    )


def dump_batch(batch: Sequence[Tuple[bytes, bytes, bytes]]) -> Tuple[bytes, List[str]]:
    """(the UTF-8 lines of a batch of records, a message for each record that could not be decoded).

    Encoded here, in the worker, so the main process only moves bytes.
    """
    lines = []
    failures = []
    for oid, tid, data in batch:
        try:
            lines.append(dump_line(oid, tid, data))
        except Exception as exc:  # noqa: BLE001 - report the record and go on
            failures.append(undecodable(oid, tid, exc))
    return "".join(lines).encode("utf-8"), failures


def _hex8(row: dict, key: str, where: str) -> bytes:
    value = row.get(key)
    if not isinstance(value, str) or len(value) != 16:
        raise CommandError(f"{where}: {key!r} must be 16 hex digits, not {value!r}"[:MAX_MESSAGE])
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise CommandError(f"{where}: {key!r} must be 16 hex digits, not {value!r}") from None


def record_from_line(line: bytes, where: str) -> Tuple[bytes, bytes, bytes]:
    """(oid, tid, record) of one dump line; CommandError saying what is wrong with it."""
    try:
        # The codec's reader: a state may nest deeper than json.loads can read.
        row = read_json(line.decode("utf-8", "surrogatepass"))
    except ValueError as exc:  # CodecError and UnicodeDecodeError
        raise CommandError(f"{where}: not JSON: {exc}"[:MAX_MESSAGE]) from None
    if not isinstance(row, dict):
        raise CommandError(f"{where}: a line must be a JSON object, not {type(row).__name__}")
    oid = _hex8(row, "oid", where)
    tid = _hex8(row, "tid", where)
    module, name = row.get("class_mod"), row.get("class_name")
    if not isinstance(module, str) or not isinstance(name, str) or "state" not in row:
        raise CommandError(f"{where}: a line needs \"class_mod\" and \"class_name\" strings and a \"state\"")
    try:
        data = codec.encode_zodb_record({"@cls": [module, name], "@s": row["state"]})
    except ValueError as exc:
        raise CommandError(f"{where}: oid {oid.hex()}: cannot encode the state: {exc}"[:MAX_MESSAGE]) from None
    return oid, tid, data


def load_batch(batch: Iterable[Tuple[str, bytes]]) -> List[Tuple[bytes, bytes, bytes, str]]:
    """(oid, tid, record, where) for each (where, line) of a batch, blank lines left out."""
    out = []
    for where, line in batch:
        if line.strip():
            out.append((*record_from_line(line, where), where))
    return out


@contextlib.contextmanager
def _output(path: Optional[str], stdout: IO[bytes]) -> Iterator[IO[bytes]]:
    """stdout, or a file that replaces path only once it is complete."""
    if path is None:
        yield stdout
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, partial = tempfile.mkstemp(prefix=".zodb-json-codec-", suffix=".jsonl", dir=directory)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # mkstemp's file is private; the result is an ordinary file
        with open(fd, "wb") as stream:
            yield stream
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)


def dump(source: Optional[str], target: Optional[str], *, stdout: IO[bytes], err: IO[str], jobs: int = 1,
         part: Optional[Part] = None, all_revisions: bool = False) -> int:
    """Write the records of the FileStorage source as JSON Lines to target (None: stdout).

    Exit status 1 if some could not be decoded.
    """
    failed = 0
    progress = Progress("dump", err)
    with open_storage(source) as storage, _output(target, stdout) as out:
        try:
            for text, failures in map_records(records(storage, all_revisions, part), dump_batch, jobs, progress):
                out.write(text)
                for message in failures:
                    failed += 1
                    print(f"dump: {message}", file=err)
        finally:
            progress.close()
    if failed:
        print(f"dump: {failed} records could not be decoded", file=err)
        return 1
    return 0


class Line(NamedTuple):
    where: str
    data: bytes
    position: float  # how far into the input, 0..1, when its size is known


def _lines(stream: IO[bytes], name: str) -> Iterator[Line]:
    try:
        size = os.fstat(stream.fileno()).st_size
    except (OSError, ValueError, AttributeError):
        size = 0
    read = 0
    # Lines end at b"\n" only: JSON text may hold U+2028 unescaped.
    for number, line in enumerate(stream, 1):
        read += len(line)
        yield Line(f"{name} line {number}", line, read / size if size else 0.0)


def load(source: str, target: str, *, out: IO[str], err: IO[str], stdin: Optional[IO[bytes]] = None,
         jobs: int = 1) -> int:
    """JSON Lines (a file, or "-" for stdin) into a new FileStorage at target, with their oids and tids."""
    progress = Progress("load", err)
    with contextlib.ExitStack() as stack:
        if source == "-":
            stream: Any = stdin
            name = "stdin"
        else:
            try:
                stream = stack.enter_context(open(source, "rb"))
            except FileNotFoundError:
                raise CommandError(f"no such file: {source}") from None
            except OSError as exc:
                raise CommandError(f"cannot read {source}: {exc.strerror}") from None
            name = source
        storage = stack.enter_context(new_storage(target))
        stack.callback(progress.close)
        for batch in map_records(_lines(stream, name), load_batch, jobs, progress, prepare=lambda line: line[:2]):
            for oid, tid, data, where in batch:
                storage.add(oid, tid, data, where)
    if not storage.records:
        print(f"load: warning: {name} holds no records", file=err)
    print(f"load: {storage.records} records in {storage.transactions} transactions into {target}", file=out)
    return 0
