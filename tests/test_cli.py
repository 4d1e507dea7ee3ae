"""The command line, run as users run it: ``python -m zodb_json_codec dump|verify [PATH]``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import corpus
from helpers import cli
import zodb_json_codec

from ZODB.FileStorage import FileStorage
from ZODB.utils import load_current, p64

pytestmark = pytest.mark.slow  # the command line in child processes

SAMPLE = Path(zodb_json_codec.__file__).with_name("sample.fs")
PUBLIC = corpus.DATA / "public.fs"
SUMMARY = re.compile(
    r"^verify: (?P<records>\d+) records, (?P<dict>\d+) same \(dict path\), "
    r"(?P<json>\d+) same \(json path\), (?P<lost>\d+) lost(?P<rest>.*)$"
)
FIELDS = {"oid", "tid", "class_mod", "class_name", "state", "refs"}


def revisions(path: Path) -> int:
    storage = FileStorage(str(path), read_only=True)
    try:
        return sum(1 for txn in storage.iterator() for rec in txn if rec.data)
    finally:
        storage.close()


def summary(proc: subprocess.CompletedProcess) -> dict:
    lines = proc.out.strip().splitlines()
    assert lines, f"no output; stderr: {proc.err}"
    m = SUMMARY.match(lines[-1])
    assert m, lines[-1]
    return {k: (int(v) if v.isdigit() else v) for k, v in m.groupdict().items()}


TRANSACTION_FIELDS = {"transaction", "status", "user", "description", "extension"}


def dump_lines(text: str) -> list:
    # JSON Lines end at "\n" only: str.splitlines() would also split at a
    # U+2028 inside a string, which JSON text may hold unescaped.
    assert text.endswith("\n")
    rows = [json.loads(line) for line in text[:-1].split("\n")]
    headers = [row for row in rows if "transaction" in row]  # each before its transaction's records
    assert all(set(row) == TRANSACTION_FIELDS for row in headers)
    rows = [row for row in rows if "transaction" not in row]
    for row in rows:
        assert set(row) == FIELDS
        assert re.fullmatch(r"[0-9a-f]{16}", row["oid"]) and re.fullmatch(r"[0-9a-f]{16}", row["tid"])
        assert isinstance(row["class_mod"], str) and isinstance(row["class_name"], str)
        assert isinstance(row["refs"], list) and all(isinstance(r, int) for r in row["refs"])
    return rows


@pytest.fixture(scope="module")
def wikipedia_fs(tmp_path_factory) -> Path:
    return corpus.storage_path("wikipedia", tmp_path_factory.mktemp("wikipedia"))


def test_sample_is_shipped():
    assert SAMPLE.is_file()
    assert SAMPLE.stat().st_size < 100_000
    for suffix in (".index", ".lock", ".tmp"):
        assert not SAMPLE.with_name(SAMPLE.name + suffix).exists()


def test_help():
    proc = cli("--help")
    assert proc.returncode == 0
    assert "dump" in proc.out and "verify" in proc.out


def test_version():
    proc = cli("--version")
    assert proc.returncode == 0
    assert zodb_json_codec.__version__ in proc.out
    assert zodb_json_codec.IMPLEMENTATION in proc.out


def test_a_command_is_required():
    proc = cli()
    assert proc.returncode == 2
    assert "usage:" in proc.err


@pytest.mark.parametrize("target", ["sample", "public", "wikipedia"])
def test_verify(target, wikipedia_fs):
    path = {"sample": None, "public": PUBLIC, "wikipedia": wikipedia_fs}[target]
    proc = cli("verify", *([str(path)] if path else []))
    assert proc.returncode == 0, proc.out + proc.err
    counts = summary(proc)
    assert counts["records"] == revisions(path or SAMPLE)
    assert counts["dict"] == counts["json"] == counts["records"]
    assert counts["lost"] == 0 and counts["rest"] == ""


def test_verify_sample_sees_several_revisions():
    # The sample must exercise verify beyond one revision per object.
    storage = FileStorage(str(SAMPLE), read_only=True)
    try:
        assert revisions(SAMPLE) > len(storage)
    finally:
        storage.close()


LOSSY = textwrap.dedent(
    """
    import sys
    import zodb_json_codec
    from zodb_json_codec import cli

    real_encode, real_decode = zodb_json_codec.encode_zodb_record, zodb_json_codec.decode_zodb_record

    def lossy_encode(obj):
        state = obj["@s"]
        if isinstance(state, dict) and state:
            obj = dict(obj, **{"@s": dict(list(state.items())[:-1])})  # drop a key
        return real_encode(obj)

    def failing_decode(data):
        raise ValueError("pretend this record is broken")

    if sys.argv[1] == "lossy":
        zodb_json_codec.encode_zodb_record = lossy_encode
    else:
        zodb_json_codec.decode_zodb_record = failing_decode
    sys.exit(cli.main(sys.argv[2:]))
    """
)


def test_verify_reports_lost_records():
    proc = cli("lossy", "verify", "--jobs", "1", code=LOSSY)  # the patch lives in this process only
    assert proc.returncode == 1
    counts = summary(proc)
    assert counts["lost"] > 10
    assert counts["dict"] < counts["records"] and counts["json"] < counts["records"]
    listed = [line for line in proc.err.splitlines() if line.strip().startswith("oid ")]
    assert listed and all(re.match(r"\s*oid [0-9a-f]{16} tid [0-9a-f]{16}: (dict|json) path: ", x) for x in listed)
    assert len({line.split()[1] + line.split()[3] for line in listed}) == 10  # ten records listed, no more
    assert re.search(r"\.\.\. and \d+ more", proc.err)


def test_verify_reports_undecodable_records():
    proc = cli("failing", "verify", "--show", "3", "--jobs", "1", code=LOSSY)
    assert proc.returncode == 1
    counts = summary(proc)
    assert counts["rest"] == f", {counts['records']} not decodable"
    assert counts["dict"] == counts["json"] == counts["lost"] == 0
    listed = [line for line in proc.err.splitlines() if line.strip().startswith("oid ")]
    assert len(listed) == 3
    assert all(re.search(r": undecodable: ValueError: pretend this record is broken$", line) for line in listed)
    assert f"... and {counts['records'] - 3} more" in proc.err


@pytest.mark.parametrize("target", ["sample", "public"])
def test_dump(target):
    path = PUBLIC if target == "public" else SAMPLE
    proc = cli("dump", *([str(path)] if target == "public" else ["--sample"]))
    assert proc.returncode == 0, proc.err
    assert proc.err == ""
    rows = dump_lines(proc.out)
    storage = FileStorage(str(path), read_only=True)
    try:
        assert len(rows) == len(storage)  # one line per object: its current revision
        assert len({row["oid"] for row in rows}) == len(rows)
        assert [row["tid"] for row in rows] == sorted(row["tid"] for row in rows)  # transaction order
        for row in rows:
            data, tid = load_current(storage, p64(int(row["oid"], 16)))
            assert row["tid"] == tid.hex()
            module, name, state_json, refs = zodb_json_codec.decode_zodb_record_for_pg_json(data)
            assert (row["class_mod"], row["class_name"]) == (module, name)
            assert row["state"] == json.loads(state_json)
            assert row["refs"] == list(refs)
    finally:
        storage.close()
    if target == "sample":
        assert {
            "persistent.mapping.PersistentMapping",
            "persistent.list.PersistentList",
            "BTrees.OOBTree.OOBTree",
            "BTrees.OOBTree.OOBucket",
            "BTrees.IIBTree.IIBTree",
            "BTrees.Length.Length",
        } <= {f"{row['class_mod']}.{row['class_name']}" for row in rows}
        assert sum(row["class_name"] == "OOBucket" for row in rows) > 1  # the tree split


def test_dump_writes_the_state_text_unchanged():
    # The line embeds decode_zodb_record_for_pg_json's text as is (no re-parsing).
    proc = cli("dump", "--sample")
    first = proc.out.split("\n")[1]  # after its transaction's line
    storage = FileStorage(str(SAMPLE), read_only=True)
    try:
        data, _ = load_current(storage, p64(int(json.loads(first)["oid"], 16)))
    finally:
        storage.close()
    _, _, state_json, _ = zodb_json_codec.decode_zodb_record_for_pg_json(data)
    assert f',"state":{state_json},"refs":' in first


def test_dump_to_a_file(tmp_path):
    out = tmp_path / "out.jsonl"
    proc = cli("dump", "--sample", "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert proc.out == ""
    assert out.read_text(encoding="utf-8") == cli("dump", "--sample").out


def test_dump_into_a_closed_pipe():
    with subprocess.Popen(
        [sys.executable, "-m", "zodb_json_codec", "dump", str(PUBLIC)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        json.loads(proc.stdout.readline())
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        proc.wait(timeout=600)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


def test_undone_creation(tmp_path):
    """An object whose creation was undone has no current data: dump skips it, verify its empty revision."""
    import transaction
    from persistent.mapping import PersistentMapping
    from ZODB import DB

    path = tmp_path / "undo.fs"
    db = DB(FileStorage(str(path)))
    conn = db.open()
    conn.root()["kept"] = PersistentMapping(x=1)
    transaction.commit()
    conn.root()["undone"] = PersistentMapping(y=2)
    transaction.commit()
    db.undo(db.undoLog(0, 1)[0]["id"])
    transaction.commit()
    conn.close()
    db.close()

    proc = cli("dump", str(path))
    assert proc.returncode == 0, proc.err
    rows = dump_lines(proc.out)
    assert sorted(row["oid"] for row in rows) == ["0000000000000000", "0000000000000001"]
    proc = cli("verify", str(path))
    assert proc.returncode == 0, proc.err
    assert summary(proc)["records"] == revisions(path)


@pytest.mark.parametrize("command", ["dump", "verify"])
def test_missing_file(command, tmp_path):
    missing = tmp_path / "nope.fs"
    proc = cli(command, str(missing))
    assert proc.returncode == 2
    assert proc.out == ""
    assert proc.err.count("\n") == 1, proc.err
    assert str(missing) in proc.err and "error" in proc.err


@pytest.mark.parametrize("command", ["dump", "verify"])
def test_not_a_filestorage(command, tmp_path):
    junk = tmp_path / "junk.fs"
    junk.write_bytes(b"this is not a FileStorage\n" * 10)
    proc = cli(command, str(junk))
    assert proc.returncode == 2
    assert proc.err.count("\n") == 1, proc.err
    assert str(junk) in proc.err and "Traceback" not in proc.err
    assert not junk.with_name("junk.fs.index").exists()


def test_without_zodb():
    # Importing the command line needs no ZODB; running a command says how to get it.
    code = "import sys; sys.modules['ZODB'] = None; from zodb_json_codec import cli; sys.exit(cli.main(sys.argv[1:]))"
    for command in ("dump", "verify"):
        proc = cli(command, "--sample", code=code)
        assert proc.returncode == 2
        assert proc.err.count("\n") == 1, proc.err
        assert "needs ZODB" in proc.err and "pip install ZODB" in proc.err
