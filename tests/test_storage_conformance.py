"""ZODB's own storage conformance suites over a storage whose every record goes through the codec and jsonb.

``CodecFileStorage`` is a FileStorage (undo, pack, iteration, history) whose
``store``, ``restore``, ``load``, ``loadBefore``, ``loadSerial`` and the
result of ``tryToResolveConflict`` pass each record through
``decode_zodb_record_for_pg_json`` -> a real PostgreSQL ``jsonb`` column
(cast and back to text in one query, one connection per thread) ->
``encode_zodb_record`` of the parsed text, and keep or return the
re-encoded bytes.  Every pass checks that the re-encoded record holds the
same objects as the one it got (``helpers.same_records``).  A difference or a codec
error raises, and is also kept in a list that ``tearDown`` checks, since
ZODB code swallows some exceptions (conflict resolution turns any error
into a ConflictError): it is always a test failure.

ZODB's mix-ins run over it once per twin (``TestConformancePython``,
``TestConformanceCython``).  The few ZODB tests that store bytes that are no
ZODB record are overridden with the same scenario on real records (see each
override's docstring); the codec's refusal of those bytes is tested below.
"""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import pytest
import ZODB.FileStorage
from ZODB import POSException, utils
from ZODB.Connection import TransactionMetaData
from ZODB.tests import (
    BasicStorage, ConflictResolution, HistoryStorage, IteratorStorage, MTStorage, PackableStorage,
    PersistentStorage, RevisionStorage, StorageTestBase, Synchronization, TransactionalUndoStorage,
)
from ZODB.tests.MinPO import MinPO
from ZODB.tests.StorageTestBase import ZERO, zodb_pickle

from helpers import same_records
from pgjsonb import JsonbConnection
from twinloader import load_twin
from zodb_json_codec._jsonread import read_json

pytestmark = pytest.mark.slow  # ZODB's storage test mix-ins, twice

MIXINS = (
    BasicStorage.BasicStorage,
    RevisionStorage.RevisionStorage,
    PackableStorage.PackableStorageWithOptionalGC,  # with PackableStorage.PackableStorage
    PackableStorage.PackableUndoStorage,
    TransactionalUndoStorage.TransactionalUndoStorage,
    ConflictResolution.ConflictResolvingStorage,
    ConflictResolution.ConflictResolvingTransUndoStorage,
    IteratorStorage.IteratorStorage,
    IteratorStorage.ExtendedIteratorStorage,
    HistoryStorage.HistoryStorage,
    MTStorage.MTStorage,
    Synchronization.SynchronizedStorage,
    PersistentStorage.PersistentStorage,
)


# ---------------------------------------------------------------------------
# The storage
# ---------------------------------------------------------------------------

class _ThreadConnections:
    """A jsonb connection per thread (MTStorage stores from several), all closed together."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: List[JsonbConnection] = []

    def jsonb_text(self, text: str) -> str:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = JsonbConnection(self._dsn)
            with self._lock:
                self._all.append(conn)
        (stored,) = conn.texts([text])
        return stored

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


class CodecFileStorage(ZODB.FileStorage.FileStorage):
    """A FileStorage that keeps and returns every record as the codec gives it back after jsonb.

    ``codec`` is a twin (tests/twinloader.py), ``problems`` a list that
    collects every failed pass.  Like FileStorage, ``store`` and ``restore``
    refuse a read-only storage or a foreign transaction before they look at
    the data, so ZODB's checks of those refusals, which pass bytes that are
    no record, reach the refusal and not the codec.
    """

    def __init__(self, file_name: str, codec: Any, dsn: str, problems: list, **kwargs: Any) -> None:
        # Set before FileStorage.__init__, which may already load records.
        self.codec = codec
        self.codec_problems = problems
        self.codec_passes = 0  # records that went through the codec and came back the same
        self._passes_lock = threading.Lock()
        self._jsonb = _ThreadConnections(dsn)
        super().__init__(file_name, **kwargs)

    def through_codec(self, data: Optional[bytes], where: str) -> Optional[bytes]:
        """The record after decode_zodb_record_for_pg_json -> jsonb -> encode_zodb_record, checked."""
        if data is None:  # restore() of an object whose creation was undone
            return None
        try:
            module, name, text, _ = self.codec.decode_zodb_record_for_pg_json(data)
            stored = self._jsonb.jsonb_text(text)
            again = self.codec.encode_zodb_record({"@cls": [module, name], "@s": read_json(stored)})
            kept = same_records(data, again)
        except Exception as exc:
            self.codec_problems.append(f"{where}: {exc!r} for {data!r}")
            raise
        if not kept:
            message = f"{where}: the codec changed the objects of {data!r} (got back {again!r})"
            self.codec_problems.append(message)
            raise AssertionError(message)
        with self._passes_lock:
            self.codec_passes += 1
        return again

    def _refuse_early(self, transaction: Any) -> None:
        # FileStorage.store/restore begin with these checks.
        if self._is_read_only:
            raise POSException.ReadOnlyError()
        if transaction is not self._transaction:
            raise POSException.StorageTransactionError(self, transaction)

    def store(self, oid, oldserial, data, version, transaction):
        self._refuse_early(transaction)
        return super().store(oid, oldserial, self.through_codec(data, "store"), version, transaction)

    def restore(self, oid, serial, data, version, prev_txn, transaction):
        self._refuse_early(transaction)
        return super().restore(oid, serial, self.through_codec(data, "restore"), version, prev_txn,
                               transaction)

    def load(self, oid, version=""):
        data, tid = super().load(oid, version)
        return self.through_codec(data, "load"), tid

    def loadSerial(self, oid, serial):
        return self.through_codec(super().loadSerial(oid, serial), "loadSerial")

    def loadBefore(self, oid, tid):
        found = super().loadBefore(oid, tid)
        if found is None:
            return None
        data, start, end = found
        return self.through_codec(data, "loadBefore"), start, end

    def tryToResolveConflict(self, oid, committedSerial, oldSerial, newpickle, committedData=b""):
        resolved = super().tryToResolveConflict(oid, committedSerial, oldSerial, newpickle, committedData)
        return self.through_codec(resolved, "tryToResolveConflict")

    def close(self):
        try:
            super().close()
        finally:
            self._jsonb.close()


# ---------------------------------------------------------------------------
# One PostgreSQL for the module (conftest's module_pg_dsn)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="class", autouse=True)
def _class_database(request, module_pg_dsn):
    if request.cls is not None:
        request.cls.dsn = module_pg_dsn


# ---------------------------------------------------------------------------
# ZODB's suites, once per twin
# ---------------------------------------------------------------------------

class _RealRecordsWhereZodbStoresBytes:
    """Overrides of ZODB tests that store bytes which are no ZODB record: the same scenario on records."""

    def test_tid_ordering_w_commit(self):
        """BasicStorage.test_tid_ordering_w_commit with MinPO records where ZODB stores b'x' and b'y'.

        Those bytes are no ZODB record, which the codec refuses with a
        ValueError (test_the_codec_refuses_the_bytes_zodbs_tests_store).
        The scenario is otherwise ZODB's, line for line.
        """
        t = TransactionMetaData()
        self._storage.tpc_begin(t)
        self._storage.store(ZERO, ZERO, zodb_pickle(MinPO("x")), "", t)
        self._storage.tpc_vote(t)
        tids = []
        self._storage.tpc_finish(t, lambda tid: tids.append(tid))

        t = TransactionMetaData()
        self._storage.tpc_begin(t)
        self._storage.store(ZERO, tids[0], zodb_pickle(MinPO("y")), "", t)
        self._storage.tpc_vote(t)

        to_join = []

        def run_in_thread(func):
            t = threading.Thread(target=func)
            t.daemon = True
            t.start()
            to_join.append(t)

        started = threading.Event()
        finish = threading.Event()

        @run_in_thread
        def commit():
            def callback(tid):
                started.set()
                tids.append(tid)
                finish.wait()

            self._storage.tpc_finish(t, callback)

        results = {}
        started.wait()
        attempts = []
        attempts_cond = utils.Condition()

        def update_attempts():
            with attempts_cond:
                attempts.append(1)
                attempts_cond.notify_all()

        @run_in_thread
        def load():
            update_attempts()
            results["load"] = utils.load_current(self._storage, ZERO)[1]
            results["lastTransaction"] = self._storage.lastTransaction()

        expected_attempts = 1

        if hasattr(self._storage, "getTid"):
            expected_attempts += 1

            @run_in_thread
            def getTid():
                update_attempts()
                results["getTid"] = self._storage.getTid(ZERO)

        if hasattr(self._storage, "lastInvalidations"):
            expected_attempts += 1

            @run_in_thread
            def lastInvalidations():
                update_attempts()
                invals = self._storage.lastInvalidations(1)
                if invals:
                    results["lastInvalidations"] = invals[0][0]

        with attempts_cond:
            while len(attempts) < expected_attempts:
                attempts_cond.wait()

        time.sleep(.01)  # for good measure :)
        finish.set()

        for t in to_join:
            t.join(1)

        self.assertEqual(results.pop("load"), tids[1])
        self.assertEqual(results.pop("lastTransaction"), tids[1])
        for m, tid in results.items():
            self.assertEqual(tid, tids[1])


def _conformance_case(twin: str, class_name: str) -> type:
    """The TestCase running ZODB's mix-ins over CodecFileStorage with this twin."""

    class Conformance(_RealRecordsWhereZodbStoresBytes, StorageTestBase.StorageTestBase, *MIXINS):
        """ZODB's storage mix-ins over CodecFileStorage with one twin."""

        dsn = ""  # set by _class_database
        use_extension_bytes = True  # FileStorage keeps transaction extensions as written

        def setUp(self):
            self.codec = load_twin(twin)  # skips or fails as tests/twinloader.py decides
            self.codec_problems: List[str] = []
            StorageTestBase.StorageTestBase.setUp(self)  # a temporary directory
            self.open(create=1)

        def open(self, **kwargs):
            self._storage = CodecFileStorage("Conformance.fs", self.codec, self.dsn, self.codec_problems,
                                             **kwargs)

        def tearDown(self):
            StorageTestBase.StorageTestBase.tearDown(self)
            assert not self.codec_problems, "records the codec did not keep:\n" + "\n".join(self.codec_problems)

    Conformance.__name__ = Conformance.__qualname__ = class_name
    return Conformance


TestConformancePython = _conformance_case("python", "TestConformancePython")
TestConformanceCython = _conformance_case("cython", "TestConformanceCython")


# ---------------------------------------------------------------------------
# The storage itself
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"x", b"y", b"", b"2"])
def test_the_codec_refuses_the_bytes_zodbs_tests_store(impl, data):
    # ZODB's tests store these where the storage never unpickles them; they are no record.
    for fn in ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json"):
        with pytest.raises(ValueError):
            getattr(impl, fn)(data)


def _one_store(storage, oid: bytes, data: bytes) -> bytes:
    t = TransactionMetaData()
    storage.tpc_begin(t)
    storage.store(oid, ZERO, data, "", t)
    storage.tpc_vote(t)
    return storage.tpc_finish(t)


def _in_file(storage, oid: bytes, tid: bytes) -> bytes:
    return ZODB.FileStorage.FileStorage.loadSerial(storage, oid, tid)  # the bytes, past the codec


def test_the_storage_keeps_what_the_codec_gives_back(impl, module_pg_dsn, tmp_path):
    # ZODB's mix-ins call store, loadBefore, loadSerial and tryToResolveConflict; restore and load here.
    problems: list = []
    storage = CodecFileStorage(str(tmp_path / "Data.fs"), impl, module_pg_dsn, problems)
    try:
        data = zodb_pickle(MinPO({"a": (1, 2)}))
        tid = _one_store(storage, ZERO, data)
        stored = _in_file(storage, ZERO, tid)
        assert stored != data  # the codec writes its own protocol 3, without the memo
        assert stored == impl.encode_zodb_record(impl.decode_zodb_record(data))
        assert storage.loadSerial(ZERO, tid) == stored
        assert storage.load(ZERO) == (stored, tid)
        assert storage.loadBefore(ZERO, utils.p64(utils.u64(tid) + 1)) == (stored, tid, None)

        t = TransactionMetaData()
        storage.tpc_begin(t, utils.p64(utils.u64(tid) + 1))
        storage.restore(utils.p64(1), utils.p64(utils.u64(tid) + 1), data, "", None, t)
        storage.restore(utils.p64(2), utils.p64(utils.u64(tid) + 1), None, "", None, t)  # an undone creation
        storage.tpc_vote(t)
        restored_tid = storage.tpc_finish(t)
        assert _in_file(storage, utils.p64(1), restored_tid) == stored
        assert storage.codec_passes == 5  # store, loadSerial, load, loadBefore, restore (None is no record)
    finally:
        storage.close()
    assert problems == []


class _LosingCodec:
    """A twin that drops the state on the way back: the storage must notice."""

    def __init__(self, impl: Any) -> None:
        self.decode_zodb_record_for_pg_json = impl.decode_zodb_record_for_pg_json
        self._encode = impl.encode_zodb_record

    def encode_zodb_record(self, obj):
        return self._encode({"@cls": obj["@cls"], "@s": None})


def test_a_lost_object_is_a_failure_even_where_zodb_swallows_errors(impl, module_pg_dsn, tmp_path):
    problems: list = []
    storage = CodecFileStorage(str(tmp_path / "Data.fs"), _LosingCodec(impl), module_pg_dsn, problems)
    try:
        t = TransactionMetaData()
        storage.tpc_begin(t)
        with pytest.raises(AssertionError, match="changed the objects"):
            storage.store(ZERO, ZERO, zodb_pickle(MinPO(7)), "", t)
        storage.tpc_abort(t)
    finally:
        storage.close()
    assert len(problems) == 1 and "store" in problems[0]
