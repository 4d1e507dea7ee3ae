"""Fixtures shared by the suite: ``impl`` (each twin in turn) and ``pg_dsn`` (a throwaway PostgreSQL)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # corpus, pgserver

from pgserver import PgServer, PgServerError  # noqa: E402


def _twin(implementation: str) -> SimpleNamespace:
    from zodb_json_codec import _impl

    decode, encode = _impl.import_twin(implementation)
    functions = {name: getattr(decode, name) for name in _impl.DECODE_FUNCTIONS}
    functions.update({name: getattr(encode, name) for name in _impl.ENCODE_FUNCTIONS})
    return SimpleNamespace(name=implementation, decode_module=decode, encode_module=encode, **functions)


@pytest.fixture(scope="session", params=["python", "cython"])
def impl(request: pytest.FixtureRequest) -> SimpleNamespace:
    """One twin's eight functions (plus name, decode_module, encode_module).

    The compiled twin is skipped, with the reason shown, when it is not
    built or pure mode is asked for, and fails the test when
    ZODB_JSON_CODEC_PURE_PYTHON=0 (or PURE_PYTHON=0) requires it.
    """
    from zodb_json_codec import _impl

    implementation = request.param
    if implementation == "python":
        return _twin("python")
    mode = _impl.requested_mode()
    if mode == _impl.PURE:
        if sys.implementation.name == "pypy":
            pytest.skip("compiled twin: PyPy always runs the pure-Python twin")
        pytest.skip("compiled twin: pure-Python mode requested (ZODB_JSON_CODEC_PURE_PYTHON / PURE_PYTHON)")
    try:
        return _twin("cython")
    except ImportError as exc:
        if mode == _impl.COMPILED:
            pytest.fail(f"compiled twin required (ZODB_JSON_CODEC_PURE_PYTHON=0) but not importable: {exc}")
        if _impl.compiled_installed():
            pytest.fail(f"compiled twin installed but broken: {exc}")
        pytest.skip(f"compiled twin not built: {exc}")


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """DSN of a throwaway PostgreSQL for the whole session; fails (never skips) if it cannot start."""
    try:
        server = PgServer.start()
    except PgServerError as exc:
        pytest.fail(f"cannot start PostgreSQL for the jsonb tests: {exc}", pytrace=False)
    try:
        yield server.dsn
    finally:
        server.stop()
