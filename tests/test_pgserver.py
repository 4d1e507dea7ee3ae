"""The throwaway PostgreSQL of the pg_dsn fixture (tests/pgserver.py) works, and jsonb behaves as the codec assumes."""

import os

import pytest
from pgjsonb import database_errors, jsonb_texts
from pgserver import PgServer, PgServerError, find_bindir


def test_server_binaries_are_found():
    bindir = find_bindir()
    assert (bindir / "initdb").exists() and (bindir / "pg_ctl").exists()


# Through pgjsonb, the suite's one way to PostgreSQL: psycopg on CPython,
# pg8000 on PyPy (where psycopg's libpq wrapper does not work, pypy/pypy#3882).

def test_jsonb_round_trip(pg_dsn):
    (text,) = jsonb_texts(pg_dsn, ['{"b": 1, "a": [1.0, 1.5e300], "u": "\\u00e9"}'])
    # jsonb reorders keys and keeps numbers as written in positional form:
    # the reasons behind the codec's PostgreSQL rules.
    assert text.startswith('{"a": [1.0, 15')
    assert text.endswith('], "b": 1, "u": "é"}')


def test_jsonb_rejects_nul(pg_dsn):
    with pytest.raises(database_errors(), match="unsupported Unicode escape sequence"):
        jsonb_texts(pg_dsn, ['{"a": "\\u0000"}'])
    (text,) = jsonb_texts(pg_dsn, ['{"a": "\\u0001"}'])  # the driver passes escapes through
    assert text == '{"a": "\\u0001"}'


def test_start_failure_is_reported(monkeypatch):
    # A port out of range makes the server fail to start: the error says
    # why (with the server log), and its directory is removed.
    import pgserver

    made = []
    real_mkdtemp = pgserver.tempfile.mkdtemp
    monkeypatch.setattr(pgserver.tempfile, "mkdtemp", lambda **kw: made.append(real_mkdtemp(**kw)) or made[-1])
    with pytest.raises(PgServerError) as info:
        PgServer.start(port=99999)
    assert "pg_ctl exited" in str(info.value) and "server log" in str(info.value)
    assert len(made) == 1 and not os.path.exists(made[0])


def test_missing_binaries_are_reported(monkeypatch):
    import pgserver

    monkeypatch.setattr(pgserver.shutil, "which", lambda name: None)
    monkeypatch.setattr(pgserver.glob, "glob", lambda pattern: [])
    with pytest.raises(PgServerError, match="apt-get install postgresql"):
        find_bindir()
