"""The benchmarks' own parts measure what they say: generated sets, the @ns walk, counting, threads, the report.

Plain tests (no timing asserted anywhere), collected with the suites by
``pytest benchmarks``.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any, List, Tuple

import pytest

import containers
import datasets
import largetext
import loadpath
import report
import threads
from timing import interleaved, interleaved_fresh, memcpy_pass
from zodb_json_codec import _impl


# -- the generated sets ------------------------------------------------------


@pytest.mark.parametrize("name", largetext.NAMES)
def test_generated_set_is_the_same_bytes_when_built_again(name, tmp_path):
    rebuilt = datasets.fs_records(largetext.storage_path(name, tmp_path))
    assert rebuilt == datasets.load(name)


def _blob(name):
    return b"".join(datasets.load(name))


@pytest.mark.parametrize("name", largetext.NAMES)
def test_both_twins_decode_the_generated_sets_alike(name):
    """The differential check of tests/test_twins.py on the generated sets (the Cython twin's JSON text
    path leaves their long strings in the pickle): the same values, the same JSON text."""
    try:
        cython = _impl.import_twin("cython")[0]
    except ImportError:
        pytest.skip("the Cython twin is not built")
    python = _impl.import_twin("python")[0]
    for data in datasets.load(name):
        for fn in ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json"):
            assert getattr(cython, fn)(data) == getattr(python, fn)(data), fn


def test_plone_large_text_has_the_issue_shape():
    records = datasets.load("plone_large_text")
    assert 2.5e6 < sum(map(len, records)) < 3.5e6
    assert max(map(len, records)) > 1_000_000
    twin = _impl.import_twin("python")[0]
    classes = {tuple(twin.decode_zodb_record(r)["@cls"]) for r in records}
    assert {("plonelike", "Document"), ("plonelike", "NewsItem"), ("plonelike", "Event"), ("plonelike", "Folder"),
            ("BTrees.OOBTree", "OOBTree"), ("BTrees.OOBTree", "OOBucket"),
            ("persistent.mapping", "PersistentMapping")} <= classes
    bodies = [twin.decode_zodb_record(r)["@s"]["text"]["@s"]["_raw"] for r in records
              if b"RichTextValue" in r]
    sizes = [len(body.encode("utf-8")) for body in bodies]
    assert min(sizes) < 4_000 and max(sizes) >= 1_000_000
    refs = [twin.decode_zodb_record_for_pg(r)[3] for r in records]
    assert sum(map(len, refs)) > len(records)  # references between objects


@pytest.mark.parametrize("text", ["日本語", "한국어", "🙂", "👩\u200d💻", "é", "\u2028", "\u2029", "\\", '"', "\x1b", "\x07",
                                  "\t", "\n"])
def test_plone_large_text_has_what_json_text_must_handle(text):
    assert text.encode("utf-8") in _blob("plone_large_text")


def test_plone_large_text_has_zope_and_timezone_dates():
    blob = _blob("plone_large_text")
    assert b"cDateTime.DateTime\nDateTime" in blob
    assert b"cdatetime\ntimezone" in blob


def test_large_strings_are_50_kb_to_1_mb_one_with_a_nul():
    twin = _impl.import_twin("python")[0]
    strings = [twin.decode_zodb_record(r)["@s"]["data"] for r in datasets.load("large_strings") if b"File" in r[:40]]
    sizes = sorted(len(s.encode("utf-8")) for s in strings)
    assert len(sizes) == 8 and 50_000 <= sizes[0] and sizes[-1] <= 1_100_000
    assert sum("\x00" in s for s in strings) == 1


# -- the load path's pieces --------------------------------------------------


def _ns(text):
    return {"@ns": base64.b64encode(text.encode("utf-8")).decode("ascii")}


def test_unsanitize_turns_ns_markers_back_into_strings_anywhere():
    state = {"a": [1, _ns("x\x00y"), {"b": _ns("é\x00")}], "c": "plain"}
    assert loadpath.unsanitize_from_pg(state) == {"a": [1, "x\x00y", {"b": "é\x00"}], "c": "plain"}


def test_unsanitize_returns_unchanged_containers_themselves():
    inner = {"k": [1, 2, {"@ns": 3}]}  # not a string: not a marker
    state = {"unchanged": inner, "changed": [_ns("\x00")], "two keys": {"@ns": "AA==", "x": 1}}
    out = loadpath.unsanitize_from_pg(state)
    assert out is not state and out["unchanged"] is inner and out["two keys"] is state["two keys"]
    assert state["changed"] == [_ns("\x00")]  # the input is not modified
    same = {"a": [1, {"b": "c"}]}
    assert loadpath.unsanitize_from_pg(same) is same


def test_the_three_load_paths_give_a_record_of_the_same_state():
    pure_decoder, pure_encoder = _impl.import_twin("python")
    records = datasets.load("large_strings")
    rows = loadpath.state_texts(records, pure_decoder.decode_zodb_record_for_pg_json, None)
    definition = lambda m, n, s: pure_encoder.encode_zodb_record({"@cls": [m, n], "@s": json.loads(s)})  # noqa: E731
    via_definition = loadpath.text_path(definition)
    for data, row in zip(records, rows):
        assert isinstance(row.data, bytes) and row.data == row.text.encode("utf-8")
        expected = pure_decoder.decode_zodb_record(data)
        old = loadpath.old_path(pure_encoder.encode_zodb_record)(row)
        assert pure_decoder.decode_zodb_record(old) == expected
        assert loadpath.dict_path(pure_encoder.encode_zodb_record)(row) == via_definition(row)
        assert loadpath.text_path(definition, as_str=True)(row) == via_definition(row)
    assert loadpath.differences(via_definition, loadpath.dict_path(pure_encoder.encode_zodb_record), rows) == 0


# -- counting and threads ----------------------------------------------------


def test_tracked_objects_are_counted_per_record():
    items = [b"x%d" % i for i in range(500)]
    counts = containers.tracked_per_record(lambda b: {"k": [b], "t": (b, 1)}, items)
    assert counts["allocated"] == {"dict": 1, "list": 1, "tuple": 1, "other": 0, "all": 3}
    # The collection untracks the tuple of atoms; the dict holding a list stays tracked.
    assert counts["kept"] == {"dict": 1, "list": 1, "tuple": 0, "other": 0, "all": 2}
    assert counts["garbage"] == 0


def test_cycles_a_decoder_leaves_behind_are_counted():
    def cyclic(b):
        loop = [b]
        loop.append(loop)
        return 1

    assert containers.tracked_per_record(cyclic, [b"x"] * 100)["garbage"] == 1


def test_threads_run_together_and_report_records_per_second():
    seen = set()
    rates = threads.thread_throughput({"f": lambda x: seen.add(threading.get_ident())}, list(range(100)),
                                      (1, 2), budget=0.001, rounds=1)
    assert set(rates["f"]) == {1, 2}
    assert all(r["records/s"] > 0 and r["cpu/wall"] > 0 for r in rates["f"].values())
    assert len(seen) >= 2


def test_a_pass_keeps_or_drops_its_results():
    calls = []
    kept = threads.ThreadedPass(lambda x: calls.append(x) or x * 2, [1, 2, 3], 1).work()
    dropped = threads.ThreadedPass(lambda x: calls.append(x) or x * 2, [1, 2, 3], 1, keep=False).work()
    assert kept == [2, 4, 6] and dropped is None and calls == [1, 2, 3] * 2


def test_processes_run_together_and_report_records_per_second():
    rates = threads.process_throughput(len, [b"x"] * 100, (1, 2), seconds=0.01, rounds=1)
    if rates is None:
        pytest.skip("no fork on this platform: the report leaves the processes' ceiling out")
    assert set(rates) == {1, 2} and all(r > 0 for r in rates.values())


def test_a_failing_thread_fails_the_run():
    with pytest.raises(ZeroDivisionError):
        threads.run_threads(lambda: 1 / 0, 2)


def test_memcpy_pass_copies_every_item():
    items = [b"a" * 10, b"b" * 1000]
    assert len(memcpy_pass(items)()) == 2


# -- the report --------------------------------------------------------------

QUICK = ["--budget", "0.001", "--rounds", "1", "--runs", "2", "--no-server"]


def test_report_runs_every_part_but_pg(capsys):
    status = report.main(["--only", "btree_length", "public", "large_strings", "plone_large_text", *QUICK,
                          "--parts", "sets", "threads", "load", "gc", "encode"])
    out = capsys.readouterr().out
    assert status == 0, out
    for title in ("pg_json: MB/s of pickle input", "threads: pg_json records/s", "load path: time per record",
                  "objects tracked by the cycle collector", "Targets"):
        assert title in out
    assert "the codec's own text" in out


def test_the_encode_part_times_the_call_floor(monkeypatch, capsys):
    """The encode part, with the Python twin standing in for the Rust codec: its ratios, and each set's time per
    record beside the floor (the same pass calling len()), which is below every contender's time."""
    gathered = report.gather_contenders

    def with_stand_in(rust):
        contenders, notes = gathered(rust)
        if "cython" not in contenders:
            pytest.skip("the encode part compares the Cython twin, which is not built")
        contenders["rust"] = report._contender("rust", *_impl.import_twin("python"))
        return contenders, notes

    monkeypatch.setattr(report, "gather_contenders", with_stand_in)
    status = report.main(["--only", "btree_length", "public", *QUICK, "--parts", "encode"])
    out = capsys.readouterr().out
    assert status == 0, out
    for inputs in ("values json.loads made just before (a storage's load path)", "the same decoded dicts every round"):
        title = f"encode, {inputs}: time per record, best of the runs; floor:"
        assert title in out
        table = out[out.index(title):].split("\n\n")[0]
        rows = {line.split()[0]: line.split() for line in table.splitlines()
                if line.startswith(("btree_length ", "public "))}
        for name in ("btree_length", "public"):
            times = [float(rows[name][i]) for i in (2, 4, 6)]  # rust, cython, floor: "1.23 µs" is two words
            assert times[2] < min(times[0], times[1]), rows[name]
    for inputs in ("fresh", "kept"):
        assert f"cython/rust encode public ({inputs}) <= 0.6 in each of" in out


def _add_new_function(monkeypatch, wrong=False):
    """Give each twin's encoder the new function, defined as json.loads + its encode_zodb_record."""
    for implementation in ("python", "cython"):
        try:
            encoder = _impl.import_twin(implementation)[1]
        except ImportError:
            continue

        def new(module, name, state_json, encode=encoder.encode_zodb_record):
            record = encode({"@cls": [module, name], "@s": json.loads(state_json)})
            return record + b"." if wrong else record

        monkeypatch.setattr(encoder, loadpath.NEW_FUNCTION, new, raising=False)


def test_the_new_function_lights_up_when_a_twin_has_it(monkeypatch, capsys):
    _add_new_function(monkeypatch)
    status = report.main(["--only", "large_strings", *QUICK, "--parts", "load"])
    out = capsys.readouterr().out
    assert status == 0, out
    table = out.split("load path: time per record")[1].split("\n\n")[0]
    assert loadpath.NOT_YET not in table and "(c) python" in table


def test_the_load_part_times_a_new_copy_beside_memcpy(monkeypatch, capsys):
    """The least a function returning new bytes pays (a new copy of each input) is timed beside memcpy, in the
    MB/s table and in the memcpy target's line (what the two show is measured by the report, not asserted here)."""
    _add_new_function(monkeypatch)
    status = report.main(["--only", "large_strings", *QUICK, "--parts", "load"])
    out = capsys.readouterr().out
    assert status == 0, out
    table = out.split("load path: MB/s of state_json")[1].split("\n\n")[0]
    header, row = table.splitlines()[1], table.splitlines()[-1]
    assert header.split()[:4] == ["set", "MB", "memcpy", "new"], header
    assert all(float(cell.replace(",", "")) > 0 for cell in row.split()[2:4]), row
    assert "(a new bytes copy of each input alone: " in out


def test_the_new_function_must_give_the_same_bytes(monkeypatch, capsys):
    _add_new_function(monkeypatch, wrong=True)
    status = report.main(["--only", "large_strings", *QUICK, "--parts", "load"])
    assert status == 1
    assert "gives other bytes than (b)" in capsys.readouterr().out


def test_pg_part_loads_from_a_real_table(monkeypatch, capsys):
    pytest.importorskip("psycopg")
    from pgserver import PgServer, PgServerError

    try:
        server = PgServer.start()
    except PgServerError as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        _add_new_function(monkeypatch)
        status = report.main(["--only", "btree_length", "--budget", "0.001", "--rounds", "1", "--parts", "pg",
                              "--dsn", server.dsn])
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert status == 0, out
    table = out.split("pg: loading")[1].split("\n\n")[0]
    assert "(c) " in table and loadpath.NOT_YET not in table


def test_pg_part_without_a_server_is_an_error(capsys):
    assert report.main(["--only", "btree_length", *QUICK, "--parts", "pg"]) == 1
    assert "pg: not run" in capsys.readouterr().out


def test_generated_sets_are_among_the_report_sets():
    assert set(largetext.NAMES) <= set(datasets.NAMES)
    assert Path(datasets.generated_path("large_strings")).exists()


# -- instructions.py -----------------------------------------------------------


@pytest.mark.parametrize("op", ["decode", "pg_json", "encode"])
def test_instructions_inner_run_works_through_the_set(op):
    import instructions

    assert instructions._work("nested_dict", op, "python", 2) == 1
    assert instructions._work("wikipedia", op, "python", 0) == len(list(datasets.load("wikipedia")))


# -- ab.py ---------------------------------------------------------------------------


def test_ab_times_each_row_in_both_trees(capsys):
    import importlib.machinery

    import ab

    root = Path(__file__).resolve().parent.parent
    package = root / "src" / "zodb_json_codec"
    if not any((package / f"_decode_cython{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        pytest.skip("ab.py times the Cython twins built in a checkout; this one has none built in place")
    assert ab.main([str(root), str(root), "--only", "nested_dict", "btree_length", "--ops", "decode", "encode",
                    "--processes", "2", "--rounds", "1", "--budget", "0.001"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {" ".join(line.split()[:2]): float(line.split()[4]) for line in lines[1:-1]}
    assert set(rows) == {"nested_dict decode", "nested_dict encode", "btree_length decode", "btree_length encode"}
    assert all(ratio > 0 for ratio in rows.values()), rows
    assert lines[-1].startswith("worst after/before:")


def test_fresh_rows_are_new_strs_of_the_same_text():
    import textcache

    decoder, _ = _impl.import_twin("python")
    pg_json = decoder.decode_zodb_record_for_pg_json
    rows = loadpath.state_texts(textcache.decodable(datasets.load("nested_dict"), pg_json), pg_json, None)
    copies = loadpath.fresh_rows(rows)
    assert rows and [r[2] for r in copies] == [r[2] for r in rows]
    assert all(copy[2] is not row[2] for copy, row in zip(copies, rows))


def test_interleaved_gives_every_call_its_own_fresh_argument():
    made, seen = [], []

    def fresh():
        made.append(object())
        return made[-1]

    interleaved({"a": seen.append, "b": seen.append}, budget=0.0001, rounds=2, fresh=fresh)
    assert seen and len({id(x) for x in seen}) == len(seen)
    assert all(any(x is m for m in made) for x in seen)


@pytest.mark.parametrize("texts", [["[1]", "{}"], [str(n) * (n % 7 + 1) for n in range(400)]])
def test_interleaved_fresh_makes_each_chunk_just_before_it_is_timed(texts):
    """Every call of every contender gets values made for it, right before its chunk; the chunks hold every text
    (a small set repeated), in order, none over the chunk size unless one text alone is."""
    events: List[Tuple[str, Any]] = []

    def make(text):
        value = [text]
        events.append(("made", value))
        return value

    def contender(name):
        return lambda values: events.append((name, values))

    times = interleaved_fresh({"a": contender("a"), "b": contender("b")}, texts, rounds=3, make=make, chunk_bytes=64)
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())
    passes = [(i, values) for i, (what, values) in enumerate(events) if what != "made"]
    assert len(passes) % 6 == 0  # 3 rounds, 2 contenders, the same chunks each time
    chunks = [values for _, values in passes[:len(passes) // 6]]
    flat = [value[0] for values in chunks for value in values]
    assert flat == texts * (len(flat) // len(texts)) and len(flat) % len(texts) == 0
    assert all(sum(len(v[0]) for v in values) <= 64 or len(values) == 1 for values in chunks)
    start = 0
    for i, values in passes:  # the values of each call, made just before it and not used by another call
        made = [value for what, value in events[start:i]]
        assert len(made) == len(values) and all(a is b for a, b in zip(made, values))
        start = i + 1
