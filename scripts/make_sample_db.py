"""Build the sample FileStorage shipped in the package (src/zodb_json_codec/sample.fs).

    python scripts/make_sample_db.py [OUT.fs]

The commands read it with ``--sample`` (``verify`` and ``stats`` also when given no
path).  It holds only classes from persistent and BTrees and stdlib values, so
it loads anywhere ZODB is installed: a PersistentMapping root, a
PersistentList, an OOBTree big enough to split into buckets, an IIBTree, an
OOSet, a Length, and the common value types (timezone-aware datetimes,
dates, Decimals, UUIDs, sets, frozensets, tuples, bytes, big ints, floats,
nested containers, a string with NUL).  Several transactions change the
same objects, so ``verify`` sees more than one revision of some.  Needs ZODB.
"""

import argparse
import datetime
import decimal
import os
import random
import uuid
from pathlib import Path

import transaction
from BTrees.IIBTree import IIBTree
from BTrees.Length import Length
from BTrees.OOBTree import OOBTree, OOSet
from persistent.list import PersistentList
from persistent.mapping import PersistentMapping
from ZODB import DB
from ZODB.FileStorage import FileStorage

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "zodb_json_codec" / "sample.fs"
UTC = datetime.timezone.utc


def values(rng: random.Random, i: int) -> dict:
    """A document with every common value type; i makes each one different."""
    return {
        "title": f"Document {i}",
        "created": datetime.datetime(2024, 1, 1 + i % 28, 12, i % 60, 5, 123456, tzinfo=UTC),
        "day": datetime.date(2020, 1 + i % 12, 1 + i % 28),
        "price": decimal.Decimal(f"{i}.{i % 100:02d}"),
        "uid": uuid.UUID(int=rng.getrandbits(128)),
        "tags": {"zodb", "json", f"tag{i % 5}"},
        "frozen": frozenset({i, i + 1}),
        "point": (i, -i, 0.5 * i),
        "blob": bytes(rng.getrandbits(8) for _ in range(16)),
        "big": 2**100 + i,
        "ratio": i / 7,
        "nested": {"list": [1, "two", 3.0, None, True, False], "dict": {"k": [{"deep": i}]}},
        "with_nul": f"before\x00after {i}",
        "unicode": "Grüße, 世界 ✓",
    }


def build(out: Path) -> None:
    rng = random.Random(1)
    for suffix in ("", ".index", ".lock", ".tmp", ".old"):
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    db = DB(FileStorage(str(out)))
    conn = db.open()
    root = conn.root()

    root["documents"] = documents = PersistentMapping()
    for i in range(12):
        documents[f"doc-{i}"] = PersistentMapping(values(rng, i))
    root["log"] = log = PersistentList(["created"])
    root["counter"] = counter = Length(0)
    transaction.commit()

    # About 300 items: the tree splits into several OOBuckets (30 items each at most).
    root["index"] = index = OOBTree()
    for i in range(300):
        index[f"key-{i:04d}"] = {"n": i, "doc": documents[f"doc-{i % 12}"]} if i % 25 == 0 else i * 1.5
    root["numbers"] = numbers = IIBTree()
    for i in range(200):
        numbers[i] = i * i
    root["names"] = OOSet([f"name-{i}" for i in range(40)])
    counter.change(300)
    log.append("indexed")
    transaction.commit()

    # A few more revisions of objects that already exist.
    for round_ in range(3):
        documents[f"doc-{round_}"]["title"] = f"Document {round_}, revision {round_ + 2}"
        documents[f"doc-{round_}"]["modified"] = datetime.datetime(2024, 6, 1 + round_, tzinfo=UTC)
        log.append(f"edit {round_}")
        counter.change(1)
        transaction.commit()

    conn.close()
    db.close()
    for suffix in (".index", ".lock", ".tmp", ".old"):
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    print(f"{out}: {os.path.getsize(out)} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    build(ap.parse_args().out)


if __name__ == "__main__":
    main()
