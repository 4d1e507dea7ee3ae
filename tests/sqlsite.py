"""A small Plone-shaped site in a real FileStorage, for the SQL how-to (docs/sql.md) and its test.

    site = build(path)     # writes the FileStorage, returns what the test expects to find

The classes below are what the records name (``sqlsite.Folder``...).
Folders keep their children in an OOBTree ``_tree`` under their ids, as
Plone's folders (BTreeFolder2) do; the Archive has enough of them for its
tree to split into buckets.  Content has ``id``, ``title`` and a ``created``
datetime with an offset, naive, or with a pytz zone (not zoneinfo: ZODB's
pickler cannot store a ZoneInfo); two documents also have Zope's
``DateTime`` as Plone's ``modification_date``, and documents an ``author``.
The last transaction leaves a document that nothing references any more
and a reference to an object that is not in the database, and adds a folder
of datetimes in the other forms the codec writes (a pytz zone's LMT, a
repeated hour, named and pytz fixed offsets), a document with a value of
each kind JSON lacks (``FACTS``) and a file whose bytes are in a blob.
Transactions have a user, a description and (one) an extension.

Transaction times are fixed (the storage's clock is replaced while it is
written), so the tids, and the times SQL reads from them, are known exactly.
"""

from __future__ import annotations

import importlib
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from datetime import time as time_of_day
from decimal import Decimal
from uuid import UUID
from typing import Dict, Iterator, List, Tuple

import pytz
import transaction
from BTrees.OOBTree import OOBTree
from DateTime import DateTime
from persistent import Persistent
from ZODB import DB
from ZODB.blob import Blob
from ZODB.FileStorage import FileStorage
from ZODB.utils import p64, u64

UTC = timezone.utc

# The transaction times: the root is created at the first, the site at the second...
TIMES = [
    datetime(2024, 5, 1, 8, 0, tzinfo=UTC),
    datetime(2024, 5, 1, 9, 0, tzinfo=UTC),
    datetime(2024, 5, 2, 10, 0, tzinfo=UTC),
    datetime(2024, 5, 3, 11, 30, tzinfo=UTC),
]
# The facts document's values, one of each kind JSON lacks (what the SQL of docs/sql.md gives back for it).
FACTS = {
    "day": date(2024, 5, 1), "opens": time_of_day(9, 30, 15, 500),
    "span": timedelta(days=-1, seconds=5, microseconds=7),
    "price": Decimal("19.90"), "visitors": 2 ** 70, "uid": UUID("12345678-1234-5678-1234-567812345678"),
    "tags": {"news", "plone"}, "size": (1920, 1080), "raw": b"\x00\xffab",
}
REPORT = b"%PDF-1.4 an annual report\n" * 1000  # the blob of the report
ARCHIVE_SIZE = 40  # more than an OOBucket holds (30): the Archive's tree splits into buckets
MISSING_OID = 1000  # a reference to an object that is not in the database (a POSKeyError)


class Content(Persistent):
    def __init__(self, id: str, title: str, created: datetime, **attrs) -> None:
        self.id = id
        self.title = title
        self.created = created
        self.__dict__.update(attrs)


class Folder(Content):
    """Children in ``_tree`` (OOBTree id -> child), like Plone's folders."""

    def __init__(self, id: str, title: str, created: datetime, **attrs) -> None:
        super().__init__(id, title, created, **attrs)
        self._tree = OOBTree()

    def add(self, child: Content) -> Content:
        self._tree[child.id] = child
        return child


class Document(Content):
    pass


class File(Content):
    """A file whose bytes are in a ZODB blob (``file``), like Plone's File."""


class Person(Persistent):
    def __init__(self, userid: str, fullname: str) -> None:
        self.userid = userid
        self.fullname = fullname


@dataclass
class Site:
    """What build wrote: zoids by name, tids, and a few facts the test checks SQL against."""

    zoids: Dict[str, int] = field(default_factory=dict)
    tids: List[int] = field(default_factory=list)  # one per transaction, in order
    paths: Dict[str, int] = field(default_factory=dict)  # "/site/news/hello" -> zoid, of current content
    archive_buckets: List[Tuple[int, int, str]] = field(default_factory=list)  # (zoid, items, first key)
    archive_children: List[Tuple[int, str, str]] = field(default_factory=list)  # (zoid, id, title)
    created: Dict[int, Tuple[str, datetime]] = field(default_factory=dict)  # zoid -> (title, created in UTC)


class _Clock:
    """Stands for the time module in ZODB's storages: time() says what the test wants."""

    gmtime = staticmethod(time.gmtime)

    def __init__(self) -> None:
        self.now = TIMES[0].timestamp()

    def time(self) -> float:
        return self.now


@contextmanager
def _fixed_clock() -> Iterator[_Clock]:
    clock = _Clock()
    modules = [importlib.import_module(name) for name in ("ZODB.BaseStorage", "ZODB.FileStorage.FileStorage")]
    saved = [module.time for module in modules]
    for module in modules:
        module.time = clock
    try:
        yield clock
    finally:
        for module, original in zip(modules, saved):
            module.time = original


def _zoid(obj: Persistent) -> int:
    return u64(obj._p_oid)


def build(path: str, blob_dir: str) -> Site:
    site = Site()
    with _fixed_clock() as clock:
        db = DB(FileStorage(path, blob_dir=blob_dir))  # transaction 0: the root PersistentMapping
        try:
            tm = transaction.TransactionManager()
            conn = db.open(tm)
            root = conn.root()

            clock.now = TIMES[1].timestamp()
            alice = Person("alice", "Alice Liddell")
            bob = Person("bob", "Bob Builder")
            users = OOBTree({"alice": alice, "bob": bob})
            top = Folder("site", "My Site", datetime(2023, 1, 1, tzinfo=UTC))
            news = top.add(Folder("news", "News", datetime(2023, 1, 2, tzinfo=UTC)))
            hello = news.add(Document(
                "hello", "Hello world", datetime(2024, 3, 1, 9, 0, tzinfo=UTC), author=alice,
                modification_date=DateTime("2024-03-01T09:00:00+00:00")))
            launch = news.add(Document(
                "launch", "Launch day", datetime(2024, 5, 2, 10, 30, tzinfo=timezone(timedelta(hours=2))),
                author=bob, modification_date=DateTime("2024-05-02T10:30:00+02:00")))
            note = news.add(Document(
                "note", "Naive note", datetime(2024, 4, 15, 8, 0), author=alice))  # naive: meant as UTC
            old = news.add(Document("old", "Old news", datetime(2022, 6, 1, tzinfo=UTC), author=bob))
            about = top.add(Document("about", "About us", datetime(2023, 11, 5, 14, 0, tzinfo=UTC)))
            events = top.add(Folder("events", "Events", datetime(2023, 1, 3, tzinfo=UTC)))
            berlin = events.add(Document(
                "berlin", "Berlin meetup", pytz.timezone("Europe/Berlin").localize(datetime(2024, 6, 1, 12, 0))))
            newyork = events.add(Document(
                "newyork", "New York meetup", pytz.timezone("America/New_York").localize(datetime(2024, 1, 10, 9, 0))))
            archive = top.add(Folder("archive", "Archive", datetime(2023, 1, 4, tzinfo=UTC)))
            for n in range(1, ARCHIVE_SIZE + 1):
                created = datetime(2021, 1, 1, tzinfo=UTC) + timedelta(days=n)
                archive.add(Document(f"doc-{n:02d}", f"Archived {n:02d}", created))
            root["site"] = top
            root["users"] = users
            tm.get().setUser("admin", "/acl_users")
            tm.get().note("/site: created")
            tm.commit()

            clock.now = TIMES[2].timestamp()
            hello.title = "Hello World"
            tm.get().setUser("alice", "/acl_users")
            tm.get().note("/site/news/hello/edit")
            tm.get().setExtendedInfo("request_method", "POST")
            tm.commit()

            clock.now = TIMES[3].timestamp()
            # In a folder a later transaction adds, so that the oids before it stay what docs/sql.md names:
            # the other forms a zoned datetime takes (docs/sql.md, "Every datetime as a timestamptz"), a pytz
            # zone made the usual wrong way (its LMT offset, +0:53), the hour a clock change repeats, a named
            # fixed offset and pytz's FixedOffset.  (ZODB cannot store a zoneinfo zone: zodbpickle does not
            # pickle ZoneInfo; tests/test_sql_howto.py checks that form with pickle's records.)
            zones = top.add(Folder("zones", "Time zones", datetime(2023, 1, 5, tzinfo=UTC)))
            berlin_zone = pytz.timezone("Europe/Berlin")
            zones.add(Document("lmt", "Berlin by LMT", datetime(2024, 6, 1, 12, 0, tzinfo=berlin_zone)))
            zones.add(Document("fall", "Night of the clock change",
                               berlin_zone.localize(datetime(2024, 10, 27, 2, 30), is_dst=False)))
            zones.add(Document("boston", "Call with Boston",
                               datetime(2024, 2, 1, 15, 0, tzinfo=timezone(timedelta(hours=-5), "EST"))))
            zones.add(Document("cairo", "Cairo office", datetime(2024, 2, 2, 9, 0, tzinfo=pytz.FixedOffset(120))))
            # A value of each kind JSON lacks (docs/sql.md, "Every marker as SQL"), and a file in a blob.
            facts = top.add(Document("facts", "Facts and figures", datetime(2024, 5, 3, tzinfo=UTC), **FACTS))
            report = top.add(File("report", "Annual report", datetime(2024, 5, 3, 1, 0, tzinfo=UTC), file=Blob()))
            with report.file.open("w") as f:
                f.write(REPORT)
            tm.get().setUser("bob", "/acl_users")
            tm.get().note("Clean-up: old news unlinked; time zones, facts and the report added")
            del news._tree["old"]  # the document stays in the database, reached by nothing
            ghost = Person("ghost", "Gone")  # stands for an object lost from the database
            ghost._p_oid = p64(MISSING_OID)
            ghost._p_jar = conn
            about.see_also = ghost
            tm.commit()

            names = dict(users=users, alice=alice, bob=bob, site=top, news=news, hello=hello, launch=launch,
                         note=note, old=old, about=about, events=events, berlin=berlin, newyork=newyork,
                         archive=archive, news_tree=news._tree, archive_tree=archive._tree, facts=facts,
                         report=report, report_blob=report.file)
            site.zoids = {name: _zoid(obj) for name, obj in names.items()}

            found: Dict[str, Content] = {}

            def walk(obj: Content, path: str) -> None:
                found[path] = obj
                for key, child in getattr(obj, "_tree", {}).items():
                    walk(child, f"{path}/{key}")

            walk(top, "/site")
            site.paths = {path: _zoid(obj) for path, obj in found.items()}
            for obj in [*found.values(), old]:
                when = obj.created
                # A naive datetime: this application means UTC.
                when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
                site.created[_zoid(obj)] = (obj.title, when)
            children, first = archive._tree.__getstate__()
            assert first is children[0]
            for bucket in children[::2]:
                keys = list(bucket.keys())
                site.archive_buckets.append((_zoid(bucket), len(keys), keys[0]))
            site.archive_children = [(_zoid(doc), doc.id, doc.title) for doc in archive._tree.values()]
            conn.close()
        finally:
            db.close()
        storage = FileStorage(path, read_only=True)
        try:
            site.tids = [u64(txn.tid) for txn in storage.iterator()]
        finally:
            storage.close()
    assert len(site.tids) == len(TIMES), site.tids
    return site
