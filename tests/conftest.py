"""Fixtures shared by the suite: ``impl`` (each twin in turn), ``pg_dsn`` and ``module_pg_dsn`` (throwaway
PostgreSQLs), ``kept_by`` (what a storage's database gives back on a path).

Helpers shared as functions (records, the comparison, the paths, the command
line) are in tests/helpers.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator, List, Optional, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # corpus, pgserver

from pgserver import PgServer, PgServerError  # noqa: E402
from twinloader import load_twin  # noqa: E402


#: Examples of each generated-value property in the quick tier, against 150 in the whole suite.
QUICK_EXAMPLES = 50


def pytest_configure(config: pytest.Config) -> None:
    # The quick tier (-m "not slow") runs the properties with a third of their examples (tests/README.md),
    # unless CODEC_HYPOTHESIS_EXAMPLES says otherwise; helpers.MAX_EXAMPLES reads it when the test modules
    # are collected, after this.
    if config.option.markexpr == "not slow":
        os.environ.setdefault("CODEC_HYPOTHESIS_EXAMPLES", str(QUICK_EXAMPLES))


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


@pytest.fixture
def kept_by(path: str, request: pytest.FixtureRequest) -> Optional[Callable[[Sequence[str]], List[str]]]:
    """For a test parametrized over helpers.PATHS: a real jsonb column for the pg paths, None for "dict".

    (helpers.records_back takes it as its jsonb argument; PostgreSQL is only
    started for the paths that need it.)
    """
    if path == "dict":
        return None
    from pgjsonb import jsonb_texts

    dsn = request.getfixturevalue("pg_dsn")
    return lambda texts: jsonb_texts(dsn, texts)
