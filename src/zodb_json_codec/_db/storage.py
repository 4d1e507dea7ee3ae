"""FileStorages: opened read-only and read record by record in file order, or written anew with given oids and tids."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import sys
import tempfile
from typing import IO, Any, Iterator, NamedTuple, Optional, Tuple

from . import CommandError
from .signals import sigint_blocked

Part = Tuple[int, int]  # (k, n): the objects whose oid % n == k - 1


class Record(NamedTuple):
    oid: bytes
    tid: bytes
    data: bytes  # b"": a revision without data (an undone creation, a deleted object), from entries() only
    position: float  # how far into the file this record lies, 0..1 (for progress)
    current: bool = True  # the object's current revision (only entries() with all_revisions gives others)


class Transaction(NamedTuple):
    """A transaction's header: what entries() gives before its records."""
    tid: bytes
    status: bytes       # b" ", or b"p" for a transaction a pack went through
    user: bytes
    description: bytes
    extension: bytes    # a pickle of a dict, or b"" for none
    position: float


def import_zodb() -> Any:
    try:
        from ZODB.FileStorage import FileStorage
    except ImportError as exc:
        raise CommandError(
            f"this command needs ZODB to read FileStorages ({exc}); "
            "install it with: pip install ZODB (or install this package with its cli extra)"
        ) from None
    return FileStorage


# Said on standard error when the sample database is opened for want of a PATH (the command line sets it).
SAMPLE_NOTE: Optional[str] = None


@contextlib.contextmanager
def sample_path() -> Iterator[str]:
    """The small database shipped in the package, used when a command is given no PATH."""
    from importlib.resources import as_file, files

    with as_file(files(__package__.rpartition(".")[0]) / "sample.fs") as path:
        yield str(path)


@contextlib.contextmanager
def open_storage(path: Optional[str], blob_dir: Optional[str] = None,
                 err: Optional[IO[str]] = None) -> Iterator[Any]:
    """A read-only FileStorage of path (of the shipped sample when path is None), with its blobs in blob_dir;
    CommandError if it cannot be read up to its last complete transaction (what follows is said on err)."""
    FileStorage = import_zodb()
    with contextlib.ExitStack() as stack:
        if path is None:
            path = stack.enter_context(sample_path())
            if SAMPLE_NOTE:
                print(SAMPLE_NOTE, file=err or sys.stderr)
        if not os.path.exists(path):
            raise CommandError(f"no such file: {path}")
        if not os.path.isfile(path):
            raise CommandError(f"not a file: {path}")
        if blob_dir is not None and not os.path.isdir(blob_dir):
            raise CommandError(f"no such blob directory: {blob_dir}")
        if os.path.getsize(path) == 0:
            raise CommandError(f"cannot open {path} as a FileStorage: the file is empty")
        try:
            storage = FileStorage(path, read_only=True, blob_dir=blob_dir)
        except Exception as exc:  # noqa: BLE001 - any reason the file cannot be read as a FileStorage
            if type(exc).__name__ == "FileStorageFormatError":
                raise CommandError(f"cannot open {path} as a FileStorage: it does not begin as one") from None
            raise CommandError(f"cannot open {path} as a FileStorage: {type(exc).__name__}: {exc}") from None
        stack.callback(storage.close)
        _check_end(path, storage.getSize(), err)
        yield storage


def _check_end(path: str, end: int, err: Optional[IO[str]]) -> None:
    """FileStorage reads a file up to its last complete transaction and ignores the rest.  That rest is a
    transaction being written (a database in use, as Zope leaves it while it commits; or a copy of one) or
    damage.  The first is read as ZODB reads it, saying so; the second is refused: reading on would
    silently lose the records after it."""
    size = os.path.getsize(path)
    if end == size:
        return
    with open(path, "rb") as file:
        file.seek(end)
        head = file.read(_TXN_HEADER.size)
    if len(head) < _TXN_HEADER.size:
        being_written = True  # not even a whole header yet
    else:
        _, length, status, *_ = _TXN_HEADER.unpack(head)
        # Status "c": FileStorage's mark of a transaction whose commit has not finished.
        being_written = status == b"c" or end + length + 8 > size
    if not being_written:
        raise CommandError(f"{path} is damaged: its transactions end at byte {end} of {size}, and what follows "
                           "is not a transaction being written")
    print(f"zodb-json-codec: {path}: its last transaction is incomplete (being written, or cut short): read "
          f"up to byte {end}, the last {size - end} bytes left unread, as ZODB reads it", file=err or sys.stderr)


def in_part(oid: bytes, part: Optional[Part]) -> bool:
    return part is None or int.from_bytes(oid, "big") % part[1] == part[0] - 1


def records(storage: Any, all_revisions: bool = False, part: Optional[Part] = None) -> Iterator[Record]:
    """The records of storage in file (transaction) order: every revision, or only current ones.

    Revisions without data (an undone creation) are skipped.  Reading the
    file in order is sequential I/O, and gives what ``load`` needs: records
    grouped by transaction, transactions in tid order.
    """
    for entry in entries(storage, all_revisions, part):
        if type(entry) is Record and entry.data:
            yield entry


def entries(storage: Any, all_revisions: bool = False, part: Optional[Part] = None) -> Iterator[Any]:
    """records()'s records, revisions without data (data b"") among them, each transaction's header
    (a Transaction) before its first record.  With all_revisions and no part, every transaction's header,
    also of one without records (a copy then has every transaction of the original)."""
    # The index maps each oid to the file position of its current revision
    # (FileStorage's own lookup structure; there is no public equivalent
    # short of one load per record).
    index = storage._index
    size = max(storage.getSize(), 1)
    every_header = all_revisions and part is None
    header: Optional[Transaction] = None
    for item in _scan(storage):
        if type(item) is Transaction:
            header = item
            if every_header:
                yield header
                header = None
            continue
        oid, tid, data, pos = item
        if not in_part(oid, part) or (not all_revisions and (index.get(oid) != pos or data == b"")):
            continue  # an object whose current revision has no data is not in a copy of current revisions either
        if data is None:
            data = storage.loadSerial(oid, tid)  # a back pointer (left by undo): follow it
        if header is not None:
            yield header
            header = None
        yield Record(oid, tid, data, pos / size, index.get(oid) == pos)


_TXN_HEADER = struct.Struct(">8sQcHHH")  # tid, length, status, user, description, extension lengths
_DATA_HEADER = struct.Struct(">8s8sQQHQ")  # oid, tid, previous, transaction position, version length, data length


def transaction_headers(storage: Any) -> Iterator[Transaction]:
    """Each transaction's header, in file order (the data records skipped, not read)."""
    for item in _scan(storage, headers_only=True):
        yield item


def _scan(storage: Any, headers_only: bool = False) -> Iterator[Any]:
    """Each transaction's header (a Transaction), then (oid, tid, data, position) of each of its data
    records: data None for a back pointer, b"" for a record without data (an undone creation).

    ZODB's FileIterator does the same with a seek, a read and a header
    object per record; this one reads the file straight through, about twice
    as fast, which matters because the main process does it alone.  Reading
    stops where the file ended when it was opened.  Lengths that do not add
    up are a CommandError: with a .index file, FileStorage opens a file
    damaged in the middle without looking there.
    """
    name = storage._file_name
    end = storage.getSize()

    def read_exactly(size: int, where: int) -> bytes:
        chunk = read(size)
        if len(chunk) != size:
            raise CommandError(f"{name} is damaged: a record at byte {where} runs past the end of the file")
        return chunk

    with open(name, "rb", buffering=1 << 20) as file:
        read = file.read
        pos = len(read(4))  # the magic number, checked by FileStorage
        while pos < end:
            tid, length, status, ulen, dlen, elen = _TXN_HEADER.unpack(read_exactly(_TXN_HEADER.size, pos))
            txn_end = pos + length
            if status == b"c":  # a transaction still being written: nothing after it is committed
                return
            here = pos + _TXN_HEADER.size + ulen + dlen + elen
            if status not in b" pu" or txn_end + 8 > end or here > txn_end:
                raise CommandError(f"{name} is damaged: the transaction at byte {pos} has a bad header")
            meta = read_exactly(ulen + dlen + elen, pos)
            if status != b"u":
                yield Transaction(tid, status, meta[:ulen], meta[ulen:ulen + dlen], meta[ulen + dlen:], pos / end)
            if headers_only:
                pos = txn_end + 8
                file.seek(pos)
                continue
            while here < txn_end:
                oid, rtid, _, tloc, vlen, plen = _DATA_HEADER.unpack(read_exactly(_DATA_HEADER.size, here))
                size = _DATA_HEADER.size + (plen or 8)
                if tloc != pos or here + size > txn_end or rtid != tid:
                    raise CommandError(f"{name} is damaged: the record at byte {here} does not fit its transaction")
                if vlen:
                    raise CommandError(f"{name}: a record with a version (ZODB 3) at byte {here}")
                if plen:
                    data: Optional[bytes] = read_exactly(plen, here)
                    if status != b"u":
                        yield oid, rtid, data, here
                else:
                    back = int.from_bytes(read_exactly(8, here), "big")
                    if status != b"u":
                        yield oid, rtid, None if back else b"", here
                here += size
            if here != txn_end or int.from_bytes(read_exactly(8, txn_end), "big") != length:
                raise CommandError(f"{name} is damaged: the transaction at byte {pos} has a bad length")
            pos = txn_end + 8


class NewStorage:
    """A new FileStorage filled with records of given oids and tids, in transaction order.

    It is written in a temporary directory beside path and appears at path
    only when ``finish`` succeeds; ``abort`` (or any failure) leaves nothing.
    With blob_dir, its blobs are written beside it too and appear at blob_dir
    (a new directory) at the same time.
    """

    def __init__(self, path: str, blob_dir: Optional[str] = None) -> None:
        FileStorage = import_zodb()
        from ZODB.Connection import TransactionMetaData

        self._meta = TransactionMetaData
        self.path = path
        self.blob_dir = blob_dir
        if os.path.lexists(path):
            raise CommandError(f"{path} already exists; give the name of a new file")
        if blob_dir is not None and os.path.lexists(blob_dir):
            raise CommandError(f"{blob_dir} already exists; give the name of a new blob directory")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise CommandError(f"no such directory: {directory}")
        try:
            self._workdir = tempfile.mkdtemp(prefix=".zodb-json-codec-", dir=directory)
        except OSError as exc:
            raise CommandError(f"cannot write in {directory}: {exc.strerror}") from None
        blobs = os.path.join(self._workdir, "blobs") if blob_dir is not None else None
        try:
            self._storage = FileStorage(os.path.join(self._workdir, "Data.fs"), create=True, blob_dir=blobs)
        except BaseException:
            shutil.rmtree(self._workdir, ignore_errors=True)
            raise
        self._txn: Any = None
        self._tid: Optional[bytes] = None
        self._oids: set = set()
        self.records = 0
        self.transactions = 0
        self.blobs = 0

    def transaction(self, header: Transaction, where: str) -> None:
        """Begin the transaction whose records come next, with the header's metadata (it may have none)."""
        if header.tid == self._tid:
            raise CommandError(f"{where}: transaction {header.tid.hex()} begins twice")
        self._begin(header, where)

    def add(self, oid: bytes, tid: bytes, data: Optional[bytes], where: str, blob: Optional[str] = None) -> None:
        """Store one record (data None: a revision without data); where says where it came from, for error
        messages.  blob: a file holding the record's blob, moved into the new storage's blob directory."""
        if tid != self._tid:
            self._begin(Transaction(tid, b" ", b"", b"", b"", 0.0), where)
        elif oid in self._oids:
            raise CommandError(f"{where}: oid {oid.hex()} appears twice in transaction {tid.hex()}")
        self._oids.add(oid)
        # restore() writes a record with the given tid, without the conflict
        # checks of store(): what ZODB's own copyTransactionsFrom uses.
        if blob is None:
            self._storage.restore(oid, tid, data, "", None, self._txn)
        else:
            self._storage.restoreBlob(oid, tid, data, blob, None, self._txn)
            self.blobs += 1
        self.records += 1

    def incoming_blob(self) -> str:
        """A path for a blob file on its way in (add(..., blob=) moves it away)."""
        return os.path.join(self._workdir, "incoming.blob")

    def _begin(self, header: Transaction, where: str) -> None:
        if self._tid is not None and header.tid < self._tid:
            raise CommandError(
                f"{where}: tid {header.tid.hex()} comes after tid {self._tid.hex()}; "
                "records must come in transaction order, as dump writes them"
            )
        self._commit()
        self._txn = self._meta(header.user, header.description, header.extension)
        self._storage.tpc_begin(self._txn, header.tid, header.status.decode("latin-1"))
        self._tid = header.tid

    def _commit(self) -> None:
        if self._txn is not None:
            self._storage.tpc_vote(self._txn)
            self._storage.tpc_finish(self._txn)
            self.transactions += 1
            self._txn = None
            self._oids = set()

    def finish(self) -> None:
        """Commit the last transaction and move the new database (its index, its blobs) to path."""
        try:
            self._commit()
            self._storage.close()
            if self.blob_dir is not None:
                try:
                    os.rename(os.path.join(self._workdir, "blobs"), self.blob_dir)
                except OSError as exc:
                    raise CommandError(f"cannot make {self.blob_dir}: {exc.strerror}; nothing written") from None
            data_fs = os.path.join(self._workdir, "Data.fs")
            try:
                os.link(data_fs, self.path)  # unlike rename, never replaces a file made meanwhile
            except FileExistsError:
                self._unmake_blob_dir()
                raise CommandError(f"{self.path} was created by someone else meanwhile; nothing written") from None
            except OSError:  # no hard links on this file system
                os.rename(data_fs, self.path)
            index = os.path.join(self._workdir, "Data.fs.index")
            if os.path.exists(index):
                os.replace(index, self.path + ".index")
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _unmake_blob_dir(self) -> None:
        if self.blob_dir is not None:
            shutil.rmtree(self.blob_dir, ignore_errors=True)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            if self._txn is not None:
                self._storage.tpc_abort(self._txn)
        with contextlib.suppress(Exception):
            self._storage.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def new_storage(path: str, blob_dir: Optional[str] = None) -> Iterator[NewStorage]:
    """A NewStorage that is finished when the block ends normally and aborted when it raises."""
    target = None
    try:
        with sigint_blocked():  # made and in charge of its removal below, or not made
            target = NewStorage(path, blob_dir)
        yield target
    except BaseException:
        if target is not None:
            target.abort()
        raise
    target.finish()
