"""Fixtures shared by the suite: ``impl`` (each twin in turn), ``pg_dsn`` and ``module_pg_dsn`` (throwaway PostgreSQLs)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # corpus, pgserver

from pgserver import PgServer, PgServerError  # noqa: E402
from twinloader import load_twin  # noqa: E402


@pytest.fixture(scope="session", params=["python", "cython"])
def impl(request: pytest.FixtureRequest) -> SimpleNamespace:
    """One twin's eight functions (plus name, decode_module, encode_module); see twinloader.load_twin."""
    return load_twin(request.param)


def _throwaway_postgresql(purpose: str) -> Iterator[str]:
    try:
        server = PgServer.start()
    except PgServerError as exc:
        pytest.fail(f"cannot start PostgreSQL for {purpose}: {exc}", pytrace=False)
    try:
        yield server.dsn
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """DSN of a throwaway PostgreSQL for the whole session; fails (never skips) if it cannot start."""
    yield from _throwaway_postgresql("the jsonb tests")


@pytest.fixture(scope="module")
def module_pg_dsn() -> Iterator[str]:
    """DSN of a throwaway PostgreSQL of the test module's own; fails (never skips) if it cannot start."""
    yield from _throwaway_postgresql("this test module")
