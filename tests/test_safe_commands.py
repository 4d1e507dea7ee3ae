"""Commands that cannot hurt: what a user's first hour with the command line met, each a test.

An existing output file is refused unless --force, and the database itself
always; commands that write somewhere need a PATH (the sample database only
with --sample; the commands that only read say when they use it); a closed
pipe ends a command quietly; a database whose last transaction is being
written is read up to it, as ZODB and repozo read it, and a file that is
empty or no FileStorage says so in one line.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

import corpus
from helpers import cli
from test_db_commands import ok, refused

SAMPLE_NOTE = "no PATH given: reading the sample database shipped with the package\n"


@pytest.fixture(scope="module")
def public(tmp_path_factory) -> Path:
    return corpus.storage_path("public", tmp_path_factory.mktemp("public"))


def test_dump_never_overwrites_what_it_was_not_asked_to(public, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")
    err = refused("dump", str(public), "-o", str(out))
    assert "already exists; give --force to replace it" in err and out.read_text() == "keep me\n"
    ok("dump", str(public), "-o", str(out), "--force", "--jobs", "1")
    assert out.read_text().startswith('{"transaction"')
    before = public.read_bytes()
    for force in ([], ["--force"]):  # the database itself, whatever the options
        err = refused("dump", str(public), "-o", str(public), *force)
        assert "is the database itself" in err
    assert public.read_bytes() == before


@pytest.mark.parametrize("command", [["dump"], ["pg-export", "--dsn", "host=/nonexistent"]], ids=lambda c: c[0])
def test_commands_that_write_need_a_path(command):
    err = refused(*command)
    assert "give the FileStorage to read (PATH), or --sample" in err


def test_the_sample_only_when_asked_for_or_said():
    proc = ok("dump", "--sample", "--jobs", "1")
    assert proc.out.startswith('{"transaction"') and proc.err == ""
    proc = ok("verify", "--jobs", "1")
    assert proc.err == f"zodb-json-codec verify: {SAMPLE_NOTE}"
    assert ok("stats", "--sample", "--jobs", "1").err == ""
    assert "give PATH or --sample, not both" in refused("stats", "x.fs", "--sample")


def test_a_closed_pipe_ends_dump_quietly(public):
    # dump | head -1: the status of a process SIGPIPE ended (as cat's), nothing on standard error.
    proc = subprocess.Popen([sys.executable, "-m", "zodb_json_codec", "dump", str(public), "--all", "--jobs", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141, err
    assert first.startswith(b'{"transaction"') and err == b""


def _append_transaction_being_written(path: Path, whole: bool) -> int:
    """Append the start of a transaction as FileStorage writes it while a commit runs; its size."""
    tid = b"\xff" * 8
    header = struct.pack(">8sQcHHH", tid, 200, b"c" if whole else b" ", 0, 0, 0)
    tail = header + (b"\0" * 50 if whole else b"")  # a header marked "c", or one whose length runs past the end
    with open(path, "ab") as file:
        file.write(tail)
    return len(tail)


@pytest.mark.parametrize("marked", [True, False], ids=["status c", "cut short"])
def test_a_database_being_written_is_read_up_to_its_last_transaction(public, tmp_path, marked):
    live = tmp_path / "live.fs"
    live.write_bytes(public.read_bytes())
    unread = _append_transaction_being_written(live, marked)
    want = ok("dump", str(public), "--all", "--jobs", "1").out
    proc = ok("dump", str(live), "--all", "--jobs", "1")
    assert proc.out == want
    assert proc.err == (f"zodb-json-codec: {live}: its last transaction is incomplete (being written, or cut "
                        f"short): read up to byte {public.stat().st_size}, the last {unread} bytes left unread, "
                        "as ZODB reads it\n")
    assert "0 lost" in ok("verify", str(live), "--jobs", "1").out


def test_a_database_with_junk_after_its_last_transaction_is_refused(public, tmp_path):
    damaged = tmp_path / "damaged.fs"
    damaged.write_bytes(public.read_bytes() + struct.pack(">8sQcHHH", b"\xff" * 8, 15, b" ", 0, 0, 0))
    err = refused("dump", str(damaged))
    assert f"{damaged}" in err and ("is damaged" in err or "cannot open" in err), err


@pytest.mark.parametrize("content, says", [(b"", "the file is empty"),
                                           (b"not a FileStorage at all\n", "it does not begin as one")],
                         ids=["empty", "not a FileStorage"])
def test_an_empty_file_or_no_filestorage_says_so(tmp_path, content, says):
    path = tmp_path / "x.fs"
    path.write_bytes(content)
    for command in ("dump", "verify", "stats"):
        err = refused(command, str(path))
        assert err == f"zodb-json-codec {command}: error: cannot open {path} as a FileStorage: {says}\n"
    assert not (tmp_path / "x.fs.index").exists()



@pytest.fixture(scope="module")
def wikipedia(tmp_path_factory) -> Path:
    return corpus.storage_path("wikipedia", tmp_path_factory.mktemp("wikipedia"))


def _command_script() -> str:
    """The installed zodb-json-codec command (its entry point catches a Ctrl-C while the package imports)."""
    script = Path(sys.executable).with_name("zodb-json-codec")
    assert script.exists(), f"no {script}: install the package (pip install -e .)"
    return str(script)


@pytest.mark.parametrize("command", ["verify", "dump"])
def test_ctrl_c_at_random_moments_ends_within_two_seconds(wikipedia, tmp_path, command):
    # At random moments from Python's first twentieth of a second (before that, Python itself is starting:
    # its own traceback) through worker start-up and work: exit 130, one line, within two seconds, nothing
    # written.  The moments are printed on failure (seed).
    import os
    import random
    import signal
    import time

    def args(out: Path) -> list:
        return {"verify": ["verify", str(wikipedia)],
                "dump": ["dump", str(wikipedia), "--all", "-o", str(out / "out.jsonl")]}[command] + ["--jobs", "2"]

    started = time.monotonic()  # how long the whole command takes here: the moments fall within it
    subprocess.run([_command_script(), *args(tmp_path)], capture_output=True, check=True)
    whole = time.monotonic() - started
    (tmp_path / "out.jsonl").unlink(missing_ok=True)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    interrupted = 0
    for run in range(8):
        out = tmp_path / f"run{run}"
        out.mkdir()
        proc = subprocess.Popen([_command_script(), *args(out)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        moment = rng.uniform(0.05, max(0.1, 0.8 * whole))
        time.sleep(moment)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        took = time.monotonic() - sent
        where = f"seed {seed}, run {run}, Ctrl-C at {moment:.3f} s"
        if proc.returncode == 0:
            continue  # it had finished
        interrupted += 1
        assert proc.returncode == 130, (where, proc.returncode, err.decode()[-2000:])
        assert err.decode().count("\n") == 1 and "interrupted; nothing" in err.decode(), (where, err.decode())
        assert took < 2, (where, took)
        assert list(out.iterdir()) == [], where
    assert interrupted >= 4, f"seed {seed}: only {interrupted} of 8 runs were still going at Ctrl-C"


# Runs the command line with the process pool replaced by one that says how many processes it was asked for.
_COUNT_POOLS = """
import sys
from zodb_json_codec._db import parallel
class Counted(Exception):
    pass
def executor(jobs, **kw):
    raise Counted(jobs)
parallel._Executor = executor
parallel.PARALLEL_FROM["dump"] = int(sys.argv.pop(1))
from zodb_json_codec import cli
try:
    cli.main(sys.argv[1:])
except Counted as exc:
    print("pool of", exc.args[0])
else:
    print("one process")
"""


@pytest.mark.parametrize("threshold, jobs, expected", [
    (64 << 20, [], "one process"),         # a database below the threshold: one process
    (1, [], "pool of"),                    # above it: the cores
    (64 << 20, ["--jobs", "2"], "pool of 2"),  # --jobs says otherwise
], ids=["small", "large", "asked"])
def test_the_default_jobs_follow_the_database_size(public, tmp_path, threshold, jobs, expected):
    proc = cli(str(threshold), "dump", str(public), "-o", str(tmp_path / "out.jsonl"), *jobs, code=_COUNT_POOLS)
    assert proc.out.startswith(expected), (proc.out, proc.err)
