"""JSON Lines, one object revision per line: records to lines (dump) and lines back to records (load).

A record's line is ``{"oid": HEX16, "tid": HEX16, "class_mod": ...,
"class_name": ..., "state": ..., "refs": [...]}``, the state exactly as
``decode_zodb_record_for_pg_json`` writes it, with ``"blob": {"file", "size",
"sha256"}`` for a blob's record (blobs.py); a revision without data is
``{"oid", "tid", "deleted": true}``.  Each transaction's line
``{"transaction": HEX16, "status", "user", "description", "extension"}``
comes before its records.  Lines come in transaction order, so ``load`` can
rebuild a FileStorage in one pass (docs/commands.md).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import tempfile
from typing import IO, Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import zodb_json_codec as codec
from zodb_json_codec._jsonread import read_json

from . import MAX_MESSAGE, CommandError, undecodable
from .parallel import map_records
from .progress import Progress
from .signals import sigint_blocked
from .blobs import (
    blob_option_hint, copy_checked, copy_file, dump_file_name, is_blob_record, line_blob, source_blob,
    with_zodb_blob_class,
)
from .storage import Part, Transaction, entries, new_storage, open_storage
from .transactions import extension_json, extension_pickle, status_byte, text_json

Blob = Tuple[str, int, str]  # a dump line's blob: file (relative to the dump's directory), size, SHA-256


def dump_line(oid: bytes, tid: bytes, data: bytes, blob: Optional[Blob] = None) -> str:
    """One JSON line; the codec's state JSON text is written as is, not parsed again."""
    if not data:
        return f'{{"oid":"{oid.hex()}","tid":"{tid.hex()}","deleted":true}}\n'
    module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(data)
    blob_json = (f',"blob":{{"file":{json.dumps(blob[0])},"size":{blob[1]},"sha256":"{blob[2]}"}}'
                 if blob is not None else "")
    return (
        f'{{"oid":"{oid.hex()}","tid":"{tid.hex()}",'
        f'"class_mod":{json.dumps(module)},"class_name":{json.dumps(name)},'
        f'"state":{state_json},"refs":[{",".join(map(str, refs))}]{blob_json}}}\n'
    )


def transaction_line(header: Transaction) -> str:
    row = {"transaction": header.tid.hex(), "status": header.status.decode("latin-1"),
           "user": text_json(header.user), "description": text_json(header.description),
           "extension": extension_json(header.extension)}
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def dump_batch(batch: Sequence[tuple]) -> Tuple[bytes, List[str]]:
    """(the UTF-8 lines of a batch of entries, a message for each record that could not be decoded).

    Encoded here, in the worker, so the main process only moves bytes.
    """
    lines = []
    failures = []
    for entry in batch:
        if type(entry) is Transaction:
            lines.append(transaction_line(entry))
            continue
        oid, tid, data, blob = entry
        try:
            lines.append(dump_line(oid, tid, data, blob))
        except Exception as exc:  # noqa: BLE001 - report the record and go on
            failures.append(undecodable(oid, tid, exc))
    return "".join(lines).encode("utf-8", "surrogatepass"), failures


def _hex8(row: dict, key: str, where: str) -> bytes:
    value = row.get(key)
    if not isinstance(value, str) or len(value) != 16:
        raise CommandError(f"{where}: {key!r} must be 16 hex digits, not {value!r}"[:MAX_MESSAGE])
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise CommandError(f"{where}: {key!r} must be 16 hex digits, not {value!r}") from None


def _line_text(value: Any, key: str, where: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict) and list(value) == ["@b"] and isinstance(value["@b"], str):
        try:
            return base64.b64decode(value["@b"], validate=True)
        except ValueError:
            pass
    raise CommandError(f"{where}: {key!r} must be a string or {{\"@b\": base64}}")


def _transaction_from_row(row: dict, where: str) -> Transaction:
    tid = _hex8(row, "transaction", where)
    status = status_byte(row.get("status", " "), where)
    extension = row.get("extension", {})
    if not isinstance(extension, dict):
        raise CommandError(f"{where}: \"extension\" must be an object")
    return Transaction(tid, status, _line_text(row.get("user", ""), "user", where),
                       _line_text(row.get("description", ""), "description", where),
                       extension_pickle(extension, where), 0.0)


# A record's line as dump spells it: its state's JSON text is handed to the codec's one-pass reader as is
# (encode_zodb_record_from_pg_json: what encode_zodb_record gives for the parsed state), not parsed first.
# Class names without escapes (the usual ones; others are read whole).
_RECORD_HEAD = re.compile(rb'\{"oid":"([0-9a-f]{16})","tid":"([0-9a-f]{16})",'
                          rb'"class_mod":"([^"\\\x00-\x1f]*)","class_name":"([^"\\\x00-\x1f]*)","state":')
_RECORD_TAIL = re.compile(rb',"refs":\[[-0-9,]*\](?:,"blob":(\{[^{}]*\}))?\}\r?\n?')


def _record_as_dumped(line: bytes, where: str) -> Optional[tuple]:
    """entry_from_line's record of a line in dump's own spelling, or None: any other line (hand-written,
    edited, or a state the reader refuses) is read whole, and its errors said, by entry_from_line."""
    head = _RECORD_HEAD.match(line)
    cut = line.rfind(b',"refs":[')
    if head is None or cut < head.end():
        return None
    tail = _RECORD_TAIL.fullmatch(line, cut)
    if tail is None:
        return None
    try:
        module, name = head.group(3).decode("utf-8"), head.group(4).decode("utf-8")
        blob = json.loads(tail.group(1)) if tail.group(1) else None
        data = codec.encode_zodb_record_from_pg_json(module, name, line[head.end():cut])
    except ValueError:
        return None
    if (module, name) == ("ZODB.blob", "Blob"):
        data = with_zodb_blob_class(data)
    return bytes.fromhex(head.group(1).decode()), bytes.fromhex(head.group(2).decode()), data, blob, where


def entry_from_line(line: bytes, where: str) -> tuple:
    """A line as load applies it: a Transaction, or (oid, tid, record or None for a revision without data,
    the line's "blob" member or None, where); CommandError saying what is wrong with it."""
    fast = _record_as_dumped(line, where)
    if fast is not None:
        return fast
    try:
        # The codec's reader: a state may nest deeper than json.loads can read.
        row = read_json(line.decode("utf-8", "surrogatepass"))
    except ValueError as exc:  # CodecError and UnicodeDecodeError
        raise CommandError(f"{where}: not JSON: {exc}"[:MAX_MESSAGE]) from None
    if not isinstance(row, dict):
        raise CommandError(f"{where}: a line must be a JSON object, not {type(row).__name__}")
    if "transaction" in row:
        return _transaction_from_row(row, where)
    oid = _hex8(row, "oid", where)
    tid = _hex8(row, "tid", where)
    if row.get("deleted") is True:
        return oid, tid, None, None, where
    module, name = row.get("class_mod"), row.get("class_name")
    if not isinstance(module, str) or not isinstance(name, str) or "state" not in row:
        raise CommandError(f"{where}: a line needs \"class_mod\" and \"class_name\" strings and a \"state\"")
    try:
        data = codec.encode_zodb_record({"@cls": [module, name], "@s": row["state"]})
    except ValueError as exc:
        raise CommandError(f"{where}: oid {oid.hex()}: cannot encode the state: {exc}"[:MAX_MESSAGE]) from None
    if (module, name) == ("ZODB.blob", "Blob"):
        data = with_zodb_blob_class(data)
    return oid, tid, data, row.get("blob"), where


def load_batch(batch: Iterable[Tuple[str, bytes]]) -> List[tuple]:
    """entry_from_line of each (where, line) of a batch, blank lines left out."""
    out = []
    for where, line in batch:
        if line.strip():
            entry = entry_from_line(line, where)
            out.append((entry, where) if type(entry) is Transaction else entry)
    return out


@contextlib.contextmanager
def _output(path: Optional[str], stdout: IO[bytes], before_replace: Any = None,
            force: bool = False) -> Iterator[IO[bytes]]:
    """stdout, or a file that appears at path only once it is complete (before_replace() called first);
    it replaces a file already there only with force."""
    if path is None:
        yield stdout
        return
    directory = os.path.dirname(os.path.abspath(path))
    partial = None
    try:
        try:
            with sigint_blocked():  # the file made and in charge of the finally below, or not made
                fd, partial = tempfile.mkstemp(prefix=".zodb-json-codec-", suffix=".jsonl", dir=directory)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # mkstemp's file is private; the result is an ordinary file
        with open(fd, "wb") as stream:
            yield stream
        if before_replace is not None:
            before_replace()
        if force:
            os.replace(partial, path)
        else:
            try:
                os.link(partial, path)  # unlike rename, never replaces a file made meanwhile
            except FileExistsError:
                raise CommandError(f"{path} was created by someone else meanwhile; nothing written") from None
            except OSError:  # no hard links on this file system
                os.replace(partial, path)
    finally:
        if partial is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)


class _DumpItem(NamedTuple):
    data: bytes        # what sizes the batches
    position: float
    entry: Any         # what the worker writes: a Transaction, or (oid, tid, data, blob)


class _BlobsOut:
    """The blob files of a dump to OUT: written into a temporary directory beside it, which becomes
    OUT.blobs when the dump is complete."""

    def __init__(self, target: str) -> None:
        self.final = target + ".blobs"
        self.name = os.path.basename(self.final)
        if os.path.lexists(self.final):
            raise CommandError(f"{self.final} already exists; remove it or give another -o")
        try:
            self.directory = tempfile.mkdtemp(prefix=".zodb-json-codec-", suffix=".blobs",
                                              dir=os.path.dirname(os.path.abspath(target)))
        except OSError as exc:
            raise CommandError(f"cannot write beside {target}: {exc.strerror}") from None

    def copy(self, storage: Any, oid: bytes, tid: bytes) -> Blob:
        source = source_blob(storage, oid, tid)
        os.makedirs(os.path.join(self.directory, oid.hex()), exist_ok=True)
        size, sha = copy_file(source, os.path.join(self.directory, oid.hex(), tid.hex() + ".blob"))
        return dump_file_name(self.name, oid, tid), size, sha

    def finish(self) -> None:
        try:
            os.rename(self.directory, self.final)
        except OSError as exc:
            raise CommandError(f"cannot make {self.final}: {exc.strerror}") from None

    def abort(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _dump_items(storage: Any, found: Iterable[Any], blobs: Optional[_BlobsOut], no_blobs: bool,
                source: Optional[str], problems: List[str], counts: Dict[str, int]) -> Iterator[_DumpItem]:
    """The entries of a storage as the workers take them, each blob's file copied on the way (here, in the
    main process: files are I/O); a blob that cannot be copied is a problem, its record written without."""
    for entry in found:
        if type(entry) is Transaction:
            yield _DumpItem(entry.extension, entry.position, entry)
            continue
        blob: Optional[Blob] = None
        if entry.data and is_blob_record(entry.data):
            counts["blobs"] += 1
            if blobs is not None:
                try:
                    blob = blobs.copy(storage, entry.oid, entry.tid)
                except CommandError as exc:
                    problems.append(str(exc))
                except OSError as exc:
                    problems.append(f"oid {entry.oid.hex()} tid {entry.tid.hex()}: cannot copy its blob: "
                                    f"{exc.strerror}")
            elif not no_blobs:
                raise CommandError(blob_option_hint(source))
        yield _DumpItem(entry.data, entry.position, (entry.oid, entry.tid, entry.data, blob))


def dump(source: Optional[str], target: Optional[str], *, stdout: IO[bytes], err: IO[str], jobs: int = 1,
         part: Optional[Part] = None, all_revisions: bool = False, blob_dir: Optional[str] = None,
         no_blobs: bool = False, force: bool = False) -> int:
    """Write the records of the FileStorage source as JSON Lines to target (None: stdout), with each
    transaction's metadata, the revisions without data, and the blob files beside target.

    Exit status 1 if some could not be decoded, or a blob file could not be copied.
    """
    if blob_dir is not None and no_blobs:
        raise CommandError("give --blob-dir or --no-blobs, not both")
    if blob_dir is not None and target is None:
        raise CommandError("with --blob-dir, give -o OUT: the blob files are written beside it (OUT.blobs)")
    if target is not None and os.path.lexists(target):
        if source is not None and os.path.exists(source) and os.path.samefile(source, target):
            raise CommandError(f"{target} is the database itself; give another -o")
        if not force:
            raise CommandError(f"{target} already exists; give --force to replace it, or another -o")
    failed = 0
    problems: List[str] = []
    counts = {"blobs": 0}
    progress = Progress("dump", err)
    with contextlib.ExitStack() as stack:
        storage = stack.enter_context(open_storage(source, blob_dir))
        blobs = None
        if blob_dir is not None and target is not None:
            with sigint_blocked():  # made and in charge of its removal, or not made
                blobs = _BlobsOut(target)
                stack.callback(blobs.abort)  # after a rename, nothing is left to remove
        out = stack.enter_context(_output(target, stdout, before_replace=blobs.finish if blobs else None,
                                          force=force))
        try:
            items = _dump_items(storage, entries(storage, all_revisions, part), blobs, no_blobs, source, problems,
                                counts)
            for text, failures in map_records(items, dump_batch, jobs, progress, prepare=lambda item: item.entry,
                                              counted=lambda item: type(item.entry) is not Transaction):
                out.write(text)
                for message in problems + failures:
                    failed += 1
                    print(f"dump: {message}", file=err)
                problems.clear()
        finally:
            progress.close()
    if counts["blobs"]:
        kept = "left out (--no-blobs)" if no_blobs else f"written to {target}.blobs"
        print(f"dump: {counts['blobs']} blob records, their files {kept}", file=err)
    if failed:
        print(f"dump: {failed} records could not be decoded or their blobs copied", file=err)
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
         jobs: int = 1, blob_dir: Optional[str] = None, no_blobs: bool = False) -> int:
    """JSON Lines (a file, or "-" for stdin) into a new FileStorage at target, with their oids and tids,
    each transaction's metadata, and the blobs (into blob_dir, a new directory) of the lines naming one."""
    if blob_dir is not None and no_blobs:
        raise CommandError("give --blob-dir or --no-blobs, not both")
    progress = Progress("load", err)
    left_out = 0
    with contextlib.ExitStack() as stack:
        if source == "-":
            stream: Any = stdin
            name = "stdin"
            base = os.getcwd()
        else:
            try:
                stream = stack.enter_context(open(source, "rb"))
            except FileNotFoundError:
                raise CommandError(f"no such file: {source}") from None
            except OSError as exc:
                raise CommandError(f"cannot read {source}: {exc.strerror}") from None
            name = source
            base = os.path.dirname(os.path.abspath(source))
        storage = stack.enter_context(new_storage(target, blob_dir))
        stack.callback(progress.close)
        for batch in map_records(_lines(stream, name), load_batch, jobs, progress, prepare=lambda line: line[:2]):
            for entry in batch:
                if type(entry[0]) is Transaction:
                    storage.transaction(*entry)
                    continue
                oid, tid, data, blob, where = entry
                if blob is not None and no_blobs:
                    left_out += 1
                    blob = None
                elif blob is not None:
                    if blob_dir is None:
                        raise CommandError(f"{where}: {name} holds blobs: give --blob-dir DIR (a new directory "
                                           "for the copy's blobs), or --no-blobs to leave them out")
                    path, size, sha = line_blob(blob, oid, tid, base, where)
                    blob = storage.incoming_blob()
                    copy_checked(path, blob, size, sha, where)
                storage.add(oid, tid, data, where, blob)
    if not storage.records:
        print(f"load: warning: {name} holds no records", file=err)
    blobs = f", {storage.blobs} blobs into {blob_dir}" if storage.blobs else ""
    print(f"load: {storage.records} records in {storage.transactions} transactions into {target}{blobs}", file=out)
    if left_out:
        print(f"load: {left_out} blob records written without their files (--no-blobs)", file=out)
    return 0
