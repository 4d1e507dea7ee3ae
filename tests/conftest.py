"""Fixtures shared by the suite: ``impl`` (each twin in turn) and ``pg_dsn`` (a throwaway PostgreSQL)."""

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
