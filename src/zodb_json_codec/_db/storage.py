"""FileStorages: opened read-only and read record by record in file order, or written anew with given oids and tids."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from typing import Any, Iterator, NamedTuple, Optional, Tuple

from . import CommandError

Part = Tuple[int, int]  # (k, n): the objects whose oid % n == k - 1


class Record(NamedTuple):
    oid: bytes
    tid: bytes
    data: bytes
    position: float  # how far into the file this record lies, 0..1 (for progress)


def import_zodb() -> Any:
    try:
        from ZODB.FileStorage import FileStorage
    except ImportError as exc:
        raise CommandError(
            f"this command needs ZODB to read FileStorages ({exc}); "
            'install it with: pip install "zodb-json-codec[cli]"'
        ) from None
    return FileStorage


@contextlib.contextmanager
def sample_path() -> Iterator[str]:
    """The small database shipped in the package, used when a command is given no PATH."""
    from importlib.resources import as_file, files

    with as_file(files(__package__.rpartition(".")[0]) / "sample.fs") as path:
        yield str(path)


@contextlib.contextmanager
def open_storage(path: Optional[str]) -> Iterator[Any]:
    """A read-only FileStorage of path (of the shipped sample when path is None); CommandError if it cannot be read whole."""
    FileStorage = import_zodb()
    with contextlib.ExitStack() as stack:
        if path is None:
            path = stack.enter_context(sample_path())
        if not os.path.exists(path):
            raise CommandError(f"no such file: {path}")
        if not os.path.isfile(path):
            raise CommandError(f"not a file: {path}")
        try:
            storage = FileStorage(path, read_only=True)
        except Exception as exc:  # noqa: BLE001 - any reason the file cannot be read as a FileStorage
            raise CommandError(f"cannot open {path} as a FileStorage: {type(exc).__name__}: {exc}") from None
        stack.callback(storage.close)
        # FileStorage opens a file whose last transaction is cut short and
        # just ignores the rest: a database copied while being written, or
        # truncated.  Reading it would silently lose those records.
        size = os.path.getsize(path)
        if storage.getSize() != size:
            raise CommandError(
                f"{path} is truncated or damaged: its transactions end at byte {storage.getSize()} of {size}"
            )
        yield storage


def in_part(oid: bytes, part: Optional[Part]) -> bool:
    return part is None or int.from_bytes(oid, "big") % part[1] == part[0] - 1


def records(storage: Any, all_revisions: bool = False, part: Optional[Part] = None) -> Iterator[Record]:
    """The records of storage in file (transaction) order: every revision, or only current ones.

    Revisions without data (an undone creation) are skipped.  Reading the
    file in order is sequential I/O, and gives what ``load`` needs: records
    grouped by transaction, transactions in tid order.
    """
    # The index maps each oid to the file position of its current revision
    # (FileStorage's own lookup structure; there is no public equivalent
    # short of one load per record).
    index = storage._index
    size = max(storage.getSize(), 1)
    for oid, tid, data, pos in _scan(storage):
        if not in_part(oid, part) or (not all_revisions and index.get(oid) != pos):
            continue
        if data is None:
            data = storage.loadSerial(oid, tid)  # a back pointer (left by undo): follow it
        if data:
            yield Record(oid, tid, data, pos / size)


_TXN_HEADER = struct.Struct(">8sQcHHH")  # tid, length, status, user, description, extension lengths
_DATA_HEADER = struct.Struct(">8s8sQQHQ")  # oid, tid, previous, transaction position, version length, data length


def _scan(storage: Any) -> Iterator[Tuple[bytes, bytes, Optional[bytes], int]]:
    """(oid, tid, data or None for a back pointer, position) of every data record of a FileStorage.

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
            read_exactly(ulen + dlen + elen, pos)
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
                    if back and status != b"u":
                        yield oid, rtid, None, here
                here += size
            if here != txn_end or int.from_bytes(read_exactly(8, txn_end), "big") != length:
                raise CommandError(f"{name} is damaged: the transaction at byte {pos} has a bad length")
            pos = txn_end + 8


class NewStorage:
    """A new FileStorage filled with records of given oids and tids, in transaction order.

    It is written in a temporary directory beside path and appears at path
    only when ``finish`` succeeds; ``abort`` (or any failure) leaves nothing.
    """

    def __init__(self, path: str) -> None:
        FileStorage = import_zodb()
        from ZODB.Connection import TransactionMetaData

        self._meta = TransactionMetaData
        self.path = path
        if os.path.lexists(path):
            raise CommandError(f"{path} already exists; give the name of a new file")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise CommandError(f"no such directory: {directory}")
        try:
            self._workdir = tempfile.mkdtemp(prefix=".zodb-json-codec-", dir=directory)
        except OSError as exc:
            raise CommandError(f"cannot write in {directory}: {exc.strerror}") from None
        self._storage = FileStorage(os.path.join(self._workdir, "Data.fs"), create=True)
        self._txn: Any = None
        self._tid: Optional[bytes] = None
        self._oids: set = set()
        self.records = 0
        self.transactions = 0

    def add(self, oid: bytes, tid: bytes, data: bytes, where: str) -> None:
        """Store one record; where says where it came from, for error messages."""
        if tid != self._tid:
            if self._tid is not None and tid < self._tid:
                raise CommandError(
                    f"{where}: tid {tid.hex()} comes after tid {self._tid.hex()}; "
                    "records must come in transaction order, as dump writes them"
                )
            self._commit()
            self._txn = self._meta()
            self._storage.tpc_begin(self._txn, tid)
            self._tid = tid
        elif oid in self._oids:
            raise CommandError(f"{where}: oid {oid.hex()} appears twice in transaction {tid.hex()}")
        self._oids.add(oid)
        # restore() writes a record with the given tid, without the conflict
        # checks of store(): what ZODB's own copyTransactionsFrom uses.
        self._storage.restore(oid, tid, data, "", None, self._txn)
        self.records += 1

    def _commit(self) -> None:
        if self._txn is not None:
            self._storage.tpc_vote(self._txn)
            self._storage.tpc_finish(self._txn)
            self.transactions += 1
            self._txn = None
            self._oids = set()

    def finish(self) -> None:
        """Commit the last transaction and move the new database (and its index) to path."""
        try:
            self._commit()
            self._storage.close()
            data_fs = os.path.join(self._workdir, "Data.fs")
            try:
                os.link(data_fs, self.path)  # unlike rename, never replaces a file made meanwhile
            except FileExistsError:
                raise CommandError(f"{self.path} was created by someone else meanwhile; nothing written") from None
            except OSError:  # no hard links on this file system
                os.rename(data_fs, self.path)
            index = os.path.join(self._workdir, "Data.fs.index")
            if os.path.exists(index):
                os.replace(index, self.path + ".index")
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            if self._txn is not None:
                self._storage.tpc_abort(self._txn)
        with contextlib.suppress(Exception):
            self._storage.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def new_storage(path: str) -> Iterator[NewStorage]:
    """A NewStorage that is finished when the block ends normally and aborted when it raises."""
    target = NewStorage(path)
    try:
        yield target
    except BaseException:
        target.abort()
        raise
    target.finish()
