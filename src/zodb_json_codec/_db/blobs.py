"""Blobs: which records have one, and their files copied byte for byte with a size and a checksum.

ZODB keeps a blob's bytes in a file of the storage's blob directory, one per
revision, not in the record (whose state says only "a Blob").  A dump writes
them beside itself: for the dump OUT, the directory OUT.blobs holds
``<oid hex>/<tid hex>.blob``, and the record's line names that file (relative
to the dump's directory), its size and its SHA-256 (docs/commands.md).
Files are streamed in chunks: no blob is read whole into memory.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
from typing import Any, Optional, Tuple

from . import MAX_MESSAGE, CommandError

CHUNK = 1 << 20
_LINE_FILE = re.compile(r"[^/\\]+\.blobs/([0-9a-f]{16})/([0-9a-f]{16})\.blob")


class _NamesOnly(pickle.Unpickler):
    """Reads a class pickle with each global as its (module, name): nothing imported."""

    def find_class(self, module: str, name: str) -> Any:
        return (module, name)


def is_blob_record(data: bytes) -> bool:
    """Whether a record is a ZODB.blob.Blob's: its class pickle names it, as a global (what ZODB writes)
    or as a pair of strings (what the encoders write, as the Rust codec did; ZODB's own is_blob_record
    does not see those)."""
    if b"ZODB.blob" not in data:
        return False
    try:
        meta = _NamesOnly(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - not a class pickle this test can read: no blob's
        return False
    if type(meta) is tuple and len(meta) == 2 and type(meta[0]) is tuple:
        meta = meta[0]  # (class, None)
    return meta == ("ZODB.blob", "Blob")


ZODB_BLOB_CLASS = b"\x80\x03cZODB.blob\nBlob\nq\x00."  # a Blob's class pickle as ZODB writes it


def with_zodb_blob_class(data: bytes) -> bytes:
    """A Blob's record with its class pickle as ZODB writes it (a global).  ZODB knows a blob's record only
    by that form (ZODB.blob.is_blob_record): copyTransactionsFrom, zodbconvert and ZEO would copy the
    encoders' pair of strings without its blob file."""
    stream = io.BytesIO(data)
    _NamesOnly(stream).load()
    return ZODB_BLOB_CLASS + data[stream.tell():]


def copy_file(source: str, target: str) -> Tuple[int, str]:
    """Copy source to the new file target in chunks: (its size, its SHA-256 in hex)."""
    digest = hashlib.sha256()
    size = 0
    with open(source, "rb") as src, open(target, "xb") as dst:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def file_digest(path: str) -> Tuple[int, str]:
    """(size, SHA-256 in hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as file:
        while True:
            chunk = file.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def source_blob(storage: Any, oid: bytes, tid: bytes) -> str:
    """The path of a record's blob file in a storage opened with its blob directory; CommandError if missing."""
    try:
        path = storage.loadBlob(oid, tid)
    except Exception as exc:  # noqa: BLE001 - POSKeyError and what a damaged blob directory raises
        raise CommandError(f"oid {oid.hex()} tid {tid.hex()}: no blob file ({type(exc).__name__}: {exc})"
                           [:MAX_MESSAGE]) from None
    return str(path)


def dump_file_name(blobs_name: str, oid: bytes, tid: bytes) -> str:
    """A blob's file as a dump line names it: relative to the dump's directory."""
    return f"{blobs_name}/{oid.hex()}/{tid.hex()}.blob"


def line_blob(value: Any, oid: bytes, tid: bytes, base: str, where: str) -> Tuple[str, int, str]:
    """(path, size, sha256) of a line's "blob" member, its file under base (the dump's directory); a
    CommandError for anything else (a hand-edited dump may not name files elsewhere)."""
    if not isinstance(value, dict):
        raise CommandError(f"{where}: \"blob\" must be an object with \"file\", \"size\" and \"sha256\"")
    name, size, sha = value.get("file"), value.get("size"), value.get("sha256")
    found = _LINE_FILE.fullmatch(name) if isinstance(name, str) else None
    if found is None or found.group(1) != oid.hex() or found.group(2) != tid.hex():
        raise CommandError(f"{where}: \"blob\" \"file\" must be DUMP.blobs/{oid.hex()}/{tid.hex()}.blob, "
                           f"not {name!r}"[:MAX_MESSAGE])
    if type(size) is not int or size < 0 or not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise CommandError(f"{where}: \"blob\" needs a \"size\" (a number) and a \"sha256\" (64 hex digits)")
    return os.path.join(base, name), size, sha


def copy_checked(source: str, target: str, size: int, sha: str, where: str) -> None:
    """Copy a dump's blob file to target, refusing one whose size or SHA-256 is not the line's."""
    try:
        got = copy_file(source, target)
    except FileNotFoundError:
        raise CommandError(f"{where}: no such blob file: {source}") from None
    except OSError as exc:
        raise CommandError(f"{where}: cannot copy {source}: {exc.strerror}") from None
    if got != (size, sha):
        os.remove(target)
        raise CommandError(f"{where}: {source} is {got[0]} bytes with SHA-256 {got[1]}, not the line's "
                           f"{size} bytes with {sha}")


def blob_option_hint(path: Optional[str]) -> str:
    return (f"{path or 'the database'} holds blob records: give --blob-dir DIR (its blob directory, e.g. "
            "var/blobstorage), or --no-blobs to leave the blobs out")
