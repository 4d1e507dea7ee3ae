"""Every example of docs/sql.md, run against a real exported database.

tests/sqlsite.py writes a small Plone-shaped site into a FileStorage with
real ZODB; the ``$ zodb-json-codec pg-export`` commands shown in the how-to
copy it into a fresh PostgreSQL database (``python -m zodb_json_codec``, with
the test's path, DSN and ``--jobs 1``), and must print what the how-to shows.
Then each ```sql block of the how-to, read from the markdown file itself, is
run as written and must return exactly the rows EXPECTED gives for its
heading.  A block without an expectation, or an expectation whose block is
gone, fails.

The session time zone is set to America/Los_Angeles, so an example that only
works when the server runs in UTC fails here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from ZODB.FileStorage import FileStorage
from ZODB.utils import get_pickle_metadata, u64

import sqlsite

DOC = Path(__file__).resolve().parents[1] / "docs" / "sql.md"
DATABASE = "sql_howto"
SESSION_TIME_ZONE = "America/Los_Angeles"
UTC = timezone.utc

# The zoids the how-to's prose names (its queries use some of them literally).
DOC_ZOIDS = {"site": 1, "users": 2, "alice": 3, "bob": 4, "about": 6, "archive": 7, "events": 8, "news": 9,
             "hello": 11, "archive_tree": 18}


# -- reading the how-to ------------------------------------------------------

class Block(NamedTuple):
    heading: str
    info: str
    text: str
    line: int


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")


def fenced_blocks(markdown: str) -> List[Block]:
    """Every fenced block with the heading it sits under (the nearest one above)."""
    blocks: List[Block] = []
    heading = ""
    fence: Optional[str] = None
    info = ""
    body: List[str] = []
    start = 0
    for number, line in enumerate(markdown.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence, info, body, start = m.group(1), m.group(2).strip(), [], number
            else:
                h = _HEADING.match(line)
                if h:
                    heading = h.group(2)
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
            blocks.append(Block(heading, info, "\n".join(body) + "\n", start))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{DOC.name}: the block opened at line {start} is never closed"
    return blocks


def is_sql(info: str) -> bool:
    # ```sql, and also ```{code-block} sql, ```postgresql, ```psql...: no SQL escapes the test.
    return re.search(r"sql|postgres", info, re.IGNORECASE) is not None


def sql_examples(markdown: str) -> Dict[str, Block]:
    """The SQL blocks by heading ("Heading (2)" for a second block under one heading)."""
    examples: Dict[str, Block] = {}
    for block in fenced_blocks(markdown):
        if not is_sql(block.info):
            continue
        key, n = block.heading, 1
        while key in examples:
            n += 1
            key = f"{block.heading} ({n})"
        examples[key] = block
    return examples


class Command(NamedTuple):
    argv: List[str]  # after the program name
    output: str


def export_commands(markdown: str) -> List[Command]:
    """The ``$ zodb-json-codec pg-export ...`` lines of the console blocks, each with the output shown under it."""
    commands: List[Command] = []
    for block in fenced_blocks(markdown):
        if block.info != "console":
            continue
        current: Optional[Command] = None  # the pg-export command whose output lines follow
        for line in block.text.splitlines():
            if line.startswith("$ "):
                argv = shlex.split(line[2:])
                current = Command(argv[1:], "") if argv[:2] == ["zodb-json-codec", "pg-export"] else None
                if current is not None:
                    commands.append(current)
            elif current is not None:
                current = commands[-1] = current._replace(output=current.output + line + "\n")
            else:
                raise AssertionError(f"{DOC.name}: an output line under no pg-export command: {line!r}")
    return commands


MARKDOWN = DOC.read_text(encoding="utf-8")
EXAMPLES = sql_examples(MARKDOWN)


# -- the exported site -------------------------------------------------------

@dataclass
class Exported:
    site: sqlsite.Site
    dsn: str
    current: Dict[int, Tuple[str, str, int, int]]  # zoid -> (class_mod, class_name, record size, tid)
    runs: List[Tuple[Command, subprocess.CompletedProcess]]
    revisions: int     # record revisions with data, as ZODB's iterator gives them
    transactions: int
    path: Path         # the FileStorage

    @property
    def z(self) -> Dict[str, int]:
        return self.site.zoids


def current_records(path: Path) -> Dict[int, Tuple[str, str, int, int]]:
    """What ZODB itself says about the current revision of every object."""
    storage = FileStorage(str(path), read_only=True)
    try:
        current = {}
        for txn in storage.iterator():
            for record in txn:
                module, name = get_pickle_metadata(record.data)
                current[u64(record.oid)] = (module, name, len(record.data), u64(txn.tid))
        return current
    finally:
        storage.close()


def revisions_and_transactions(path: Path) -> Tuple[int, int]:
    storage = FileStorage(str(path), read_only=True)
    try:
        revisions = transactions = 0
        for txn in storage.iterator():
            transactions += 1
            revisions += sum(1 for record in txn if record.data)
        return revisions, transactions
    finally:
        storage.close()


def run_export(argv: List[str], path: Path, dsn: str) -> subprocess.CompletedProcess:
    args = list(argv)
    assert args[0] == "pg-export" and args[1].endswith(".fs"), args
    args[1] = str(path)
    args[args.index("--dsn") + 1] = dsn
    args[args.index("--blob-dir") + 1] = str(path.parent / "blobs")
    return subprocess.run([sys.executable, "-m", "zodb_json_codec", *args, "--jobs", "1"],
                          capture_output=True, text=True, encoding="utf-8", timeout=300)


@pytest.fixture(scope="module")
def exported(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    if sys.implementation.name == "pypy":
        pytest.skip("psycopg 3 fails on PyPy 7.3 (pypy/pypy#3882); pg-export needs it")
    path = tmp_path_factory.mktemp("sqlsite") / "Data.fs"
    site = sqlsite.build(str(path), str(path.parent / "blobs"))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    dsn = make_conninfo(pg_dsn, dbname=DATABASE)
    commands = export_commands(MARKDOWN)
    assert commands, f"{DOC.name} shows no pg-export command"
    runs = []
    for command in commands:
        proc = run_export(command.argv, path, dsn)
        assert proc.returncode == 0, f"pg-export {command.argv} failed: {proc.stderr}"
        runs.append((command, proc))
    with psycopg.connect(dsn, autocommit=True) as conn:  # the function the date recipes use, created once
        conn.execute(EXAMPLES["Every datetime as a timestamptz"].text)
    return Exported(site, dsn, current_records(path), runs, *revisions_and_transactions(path), path)


def connect(dsn: str, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=autocommit)
    conn.execute(f"SET TimeZone = '{SESSION_TIME_ZONE}'")
    return conn


# -- what each example must return -------------------------------------------

class Effect(NamedTuple):
    """A statement that returns no rows: check(conn) then looks at what it did, before it is rolled back."""

    check: Callable[[psycopg.Connection], None]


class OnPlone(NamedTuple):
    """An example about Plone's own records: run against tests/data/plone.fs.gz (a real Plone 6.2 site,
    packed) exported by pg-export, rows(path of its FileStorage) the rows it must give."""

    rows: Callable[[Path], List[Tuple[Any, ...]]]


Expectation = Union[List[Tuple[Any, ...]], Effect, OnPlone]


@pytest.fixture(scope="module")
def plone_exported(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, Path]:
    import gzip
    import shutil

    path = tmp_path_factory.mktemp("plone") / "Data.fs"
    with gzip.open(Path(__file__).parent / "data" / "plone.fs.gz") as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE}_plone")
        conn.execute(f"CREATE DATABASE {DATABASE}_plone")
    dsn = make_conninfo(pg_dsn, dbname=f"{DATABASE}_plone")
    proc = subprocess.run([sys.executable, "-m", "zodb_json_codec", "pg-export", str(path), "--dsn", dsn,
                           "--no-blobs", "--jobs", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return dsn, path


def workflow_states(path: Path) -> List[Tuple[Any, ...]]:
    """(portal_type, workflow, review_state, count) of the current content, as ZODB's records say."""
    import zodb_json_codec

    states: Dict[int, Any] = {}
    storage = FileStorage(str(path), read_only=True)
    try:
        for oid in storage._index.keys():  # every object's current revision
            data, _ = storage.load(oid)
            states[u64(oid)] = zodb_json_codec.decode_zodb_record(data)["@s"]
    finally:
        storage.close()
    counts: Dict[Tuple[str, str, str], int] = {}
    for state in states.values():
        history = state.get("workflow_history") if isinstance(state, dict) else None
        if not (isinstance(history, dict) and "@ref" in history):
            continue
        for workflow, transitions in states[int(history["@ref"][0], 16)]["data"].items():
            steps = transitions["@t"] if isinstance(transitions, dict) else transitions  # a tuple, or a list
            key = (state.get("portal_type"), workflow, steps[-1]["review_state"])  # a comment's is its class's
            counts[key] = counts.get(key, 0) + 1
    rows = [(*key, count) for key, count in counts.items()]
    return sorted(rows, key=lambda row: (row[0] is None, row[0] or "", row[1:]))  # ORDER BY 1, 2, 3: NULL last


def title_index_serves_the_title_search(conn: psycopg.Connection) -> None:
    (indexdef,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'object_state_title'").fetchone()
    assert indexdef.endswith("ON public.object_state USING btree (((state ->> 'title'::text)))"), indexdef
    conn.execute("SET LOCAL enable_seqscan = off")  # the table is too small for the planner to bother
    plan = [line for (line,) in conn.execute("EXPLAIN " + EXAMPLES["By title"].text)]
    assert any("object_state_title" in line for line in plan), plan


def zoned_datetimes() -> List[datetime]:
    """A datetime in every form the codec writes one, at awkward moments (format.md, sql.md "Dates")."""
    import pytz
    from zoneinfo import ZoneInfo

    berlin, new_york = pytz.timezone("Europe/Berlin"), pytz.timezone("America/New_York")
    moments = [datetime(2024, 6, 1, 12, 0), datetime(2024, 10, 27, 2, 30), datetime(2024, 3, 31, 2, 30),
               datetime(2024, 1, 10, 23, 59, 59, 999999), datetime(1900, 1, 1), datetime(2038, 1, 19, 3, 14, 8)]
    zones = [timezone.utc, pytz.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5), "EST"),
             timezone(timedelta(hours=5, minutes=30, seconds=15, microseconds=5)),
             timezone(timedelta(hours=-9, minutes=-30), "MART"), pytz.FixedOffset(120), pytz.FixedOffset(-90),
             berlin, ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")]
    values = [moment.replace(tzinfo=zone) for moment in moments for zone in zones]
    for zone in (berlin, new_york):  # pytz's right way, both sides of a repeated hour, and a skipped one
        values += [zone.localize(moment, is_dst=dst) for moment in moments for dst in (True, False)]
    return values + moments  # naive: this application means UTC


def datetimes_read_as_python_reads_them(conn: psycopg.Connection) -> None:
    import json
    import pickle

    import zodb_json_codec

    values = zoned_datetimes()
    texts = [json.dumps(zodb_json_codec.pickle_to_dict(pickle.dumps(value, 3))) for value in values]
    assert {text[:6] for text in texts} == {'{"@dt"', '{"@red'}, texts  # both kinds of form are there
    got = [conn.execute("SELECT zodb_timestamptz(%s::jsonb)", (text,)).fetchone()[0] for text in texts]
    want = [value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC) for value in values]
    wrong = [(text, g, w) for text, g, w in zip(texts, got, want) if g != w]
    assert not wrong, wrong[:5]
    assert conn.execute("SELECT zodb_timestamptz('{\"@date\": \"2024-05-01\"}')").fetchone()[0] is None


def created_since(e: Exported, since: datetime) -> List[Tuple[Any, ...]]:
    rows = [(zoid, title, created) for zoid, (title, created) in e.site.created.items() if created >= since]
    return [(zoid, title) for zoid, title, _ in sorted(rows, key=lambda row: row[2])]


def containment_index_serves_containment(conn: psycopg.Connection) -> None:
    (indexdef,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'object_state_contains'").fetchone()
    assert indexdef.endswith("USING gin (state jsonb_path_ops)"), indexdef
    conn.execute("SET LOCAL enable_seqscan = off")
    plan = [line for (line,) in conn.execute("EXPLAIN " + EXAMPLES["By containment"].text)]
    assert any("object_state_contains" in line for line in plan), plan


def every_marker(e: Exported) -> List[Tuple[Any, ...]]:
    from decimal import Decimal

    f = sqlsite.FACTS
    return [(f["day"], f["opens"], f["span"], f["price"], Decimal(f["visitors"]), f["uid"], sorted(f["tags"]),
             f["size"][0], f["raw"])]


def who_changed_documents(e: Exported) -> List[Tuple[Any, ...]]:
    """(user, description, request method, zoid, title) of each document revision, as ZODB reads them."""
    import zodb_json_codec

    storage = FileStorage(str(e.path), read_only=True)
    try:
        rows = []
        for txn in storage.iterator():
            for record in txn:
                if record.data and get_pickle_metadata(record.data) == ("sqlsite", "Document"):
                    state = zodb_json_codec.decode_zodb_record(record.data)["@s"]
                    rows.append((u64(txn.tid), (txn.user.decode(), txn.description.decode(),
                                                txn.extension.get("request_method"), u64(record.oid), state["title"])))
        return [row for _, row in sorted(rows, key=lambda item: (item[0], item[1][3]))]
    finally:
        storage.close()


def per_class(e: Exported) -> List[Tuple[Any, ...]]:
    totals: Dict[Tuple[str, str], List[int]] = {}
    for module, name, size, _ in e.current.values():
        count_bytes = totals.setdefault((module, name), [0, 0])
        count_bytes[0] += 1
        count_bytes[1] += size
    rows = [(module, name, count, size) for (module, name), (count, size) in totals.items()]
    return sorted(rows, key=lambda row: -row[3])


def last_written(e: Exported) -> List[Tuple[Any, ...]]:
    latest = sorted(e.current.items(), key=lambda item: (-item[1][3], item[0]))[:5]
    return [(zoid, name, sqlsite.TIMES[e.site.tids.index(tid)]) for zoid, (_, name, _, tid) in latest]


def created_everywhere(e: Exported) -> List[Tuple[Any, ...]]:
    return sorted(e.site.created.values(), key=lambda row: row[1])


EXPECTED: Dict[str, Callable[[Exported], Expectation]] = {
    "Oids in hex": lambda e: [(1000, "00000000000003e8")],
    "Objects and bytes per class": per_class,
    "By title": lambda e: [(e.z["hello"], "Document")],
    "An index for it": lambda e: Effect(title_index_serves_the_title_search),
    "By containment": lambda e: [(e.z["hello"], "Hello World"), (e.z["note"], "Naive note")]
    if e.z["alice"] == 3 else [],  # the oid the example names
    "An index for containment": lambda e: Effect(containment_index_serves_containment),
    "Every marker as SQL": every_marker,
    "An object as it was at a tid": lambda e: [(e.site.tids[1], "Hello world")] if e.site.tids[1] == 286059510701752320
    else [],  # the tid the example names
    "Who changed what": who_changed_documents,
    "An object's path": lambda e: [("/site/news/hello",)] if e.z["hello"] == 11 else [],
    "A BTree's items": lambda e: [(id, zoid) for zoid, id, _ in e.site.archive_children]
    if e.z["archive_tree"] == 18 else [],
    "Blob sizes": lambda e: [(e.z["report"], "Annual report", len(sqlsite.REPORT))],
    "Every datetime as a timestamptz": lambda e: Effect(datetimes_read_as_python_reads_them),
    "Plone": lambda e: OnPlone(workflow_states),
    "Created after a date": lambda e: created_since(e, datetime(2024, 4, 1, tzinfo=UTC)),
    "When each was created": created_everywhere,
    "Plone's DateTime": lambda e: [
        ("Launch day", datetime(2024, 5, 2, 8, 30, tzinfo=UTC)),
        ("Hello World", datetime(2024, 3, 1, 9, 0, tzinfo=UTC)),
    ],
    "When an object was last written": last_written,
    "What an object references": lambda e: [
        (e.z["site"], "sqlsite", "Folder"), (e.z["users"], "BTrees.OOBTree", "OOBTree"),
    ],
    "Who references an object": lambda e: [
        (e.z["users"], "OOBTree", None), (e.z["hello"], "Document", "Hello World"),
        (e.z["note"], "Document", "Naive note"),
    ],
    "Follow a named reference": lambda e: [
        ("Hello World", "Alice Liddell"), ("Launch day", "Bob Builder"),
        ("Naive note", "Alice Liddell"), ("Old news", "Bob Builder"),
    ],
    "The children of a folder": lambda e: [
        (e.z["hello"], "hello", "Hello World"), (e.z["launch"], "launch", "Launch day"),
        (e.z["note"], "note", "Naive note"),
    ],
    "Walk the folder tree from the root": lambda e: sorted(e.site.paths.items()),
    "Objects nothing reaches": lambda e: [(e.z["old"], "Document", "Old news")],
    "References to missing objects": lambda e: [(e.z["about"], "Document", sqlsite.MISSING_OID)],
    "The buckets of a BTree": lambda e: [
        (n, zoid, items, first) for n, (zoid, items, first) in enumerate(e.site.archive_buckets, 1)
    ],
    "History": lambda e: [(e.site.tids[1], "Hello world"), (e.site.tids[2], "Hello World")],
}


# -- the tests -----------------------------------------------------------------

def test_every_example_has_an_expectation():
    assert EXAMPLES, f"no ```sql block found in {DOC}"
    missing = sorted(set(EXAMPLES) - set(EXPECTED))
    stale = sorted(set(EXPECTED) - set(EXAMPLES))
    assert not missing, f"{DOC.name}: SQL examples without an expectation in EXPECTED: {missing}"
    assert not stale, f"EXPECTED names examples {DOC.name} no longer has: {stale}"


@pytest.mark.parametrize("heading", sorted(set(EXAMPLES) | set(EXPECTED)))
def test_example(exported: Exported, heading: str, request: pytest.FixtureRequest):
    assert heading in EXAMPLES, f"{DOC.name} has no ```sql block under the heading {heading!r}"
    assert heading in EXPECTED, f"the ```sql block under {heading!r} in {DOC.name} has no expectation"
    example = EXAMPLES[heading]
    where = f"the example at {DOC.name}:{example.line}"
    want = EXPECTED[heading](exported)
    if isinstance(want, OnPlone):
        dsn, path = request.getfixturevalue("plone_exported")
        rows = want.rows(path)
        assert rows, "an expectation of no rows proves nothing"
        with connect(dsn) as conn:
            assert conn.execute(example.text).fetchall() == rows, where
        return
    if isinstance(want, Effect):
        # In a transaction rolled back at the end: the other examples see the table as exported.
        with connect(exported.dsn, autocommit=False) as conn:
            cursor = conn.execute(example.text)
            assert cursor.description is None, f"{where} should return no rows, got {cursor.fetchall()}"
            want.check(conn)
            conn.rollback()
        return
    assert want, "an expectation of no rows proves nothing"
    with connect(exported.dsn) as conn:
        cursor = conn.execute(example.text)
        assert cursor.description is not None, f"{where} returns no rows at all"
        assert cursor.fetchall() == want, where


def test_export_prints_what_the_howto_shows(exported: Exported):
    assert ["--all" in command.argv for command, _ in exported.runs] == [True]  # current state and history
    for command, proc in exported.runs:
        assert proc.stdout == command.output, command.argv
    with connect(exported.dsn) as conn:
        (transactions,) = conn.execute("SELECT count(*) FROM transaction_log").fetchone()
    assert exported.runs[0][1].stdout == (
        f"pg-export: {len(exported.current)} objects into object_state, {exported.revisions - len(exported.current)} "
        f"earlier revisions into object_history, {transactions} transactions into transaction_log, "
        f"1 blobs ({len(sqlsite.REPORT)} bytes) into blob_state\n")
    assert transactions == exported.transactions


def test_children_of_a_folder_whose_tree_has_buckets(exported: Exported):
    # The same query on the Archive, whose _tree keeps its 40 children in two buckets.
    sql = EXAMPLES["The children of a folder"].text
    assert sql.count("'News'") == 1
    assert len(exported.site.archive_buckets) == 2
    with connect(exported.dsn) as conn:
        rows = conn.execute(sql.replace("'News'", "'Archive'")).fetchall()
    assert rows == exported.site.archive_children
    assert len(rows) == sqlsite.ARCHIVE_SIZE


def test_zoids_named_in_the_howto(exported: Exported):
    assert {name: exported.z[name] for name in DOC_ZOIDS} == DOC_ZOIDS


def test_the_parser_sees_every_block():
    # A fence the parser missed would hide its SQL from the test: find the opening fences another way
    # (every block of the how-to names its language; closing fences name none).
    languages = [info for info in re.findall(r"^```(\S*)", MARKDOWN, re.MULTILINE) if info]
    assert [block.info for block in fenced_blocks(MARKDOWN)] == languages
    assert languages.count("sql") == len(EXAMPLES)


def test_the_path_recipe_gives_every_objects_path(exported: Exported):
    # The example asks for one document; the same query for every folder and content object (the Archive's
    # documents sit in buckets, each held by its tree and by the bucket before it).
    sql = EXAMPLES["An object's path"].text
    assert sql.count("VALUES (11::bigint, 0)") == 1
    with connect(exported.dsn) as conn:
        got = {path: conn.execute(sql.replace("VALUES (11::bigint, 0)", f"VALUES ({zoid}::bigint, 0)")).fetchone()[0]
               for path, zoid in exported.site.paths.items()}
    assert got == {path: path for path in exported.site.paths}
