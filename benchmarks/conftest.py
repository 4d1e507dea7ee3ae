"""Fixtures of the benchmark suites: ``twin`` (pickle or one twin), ``dataset``, ``records`` and ``time_each``."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable, List, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # datasets, baseline

import baseline  # noqa: E402
import datasets  # noqa: E402

# The functions the suites time, by their public names.
TIMED_FUNCTIONS = (
    "decode_zodb_record",
    "decode_zodb_record_for_pg",
    "decode_zodb_record_for_pg_json",
    "encode_zodb_record",
)

# Short loops for the one-record shapes (thousands of rounds even so) keep the
# whole run within a few minutes; scans get at least five whole passes.
SYNTHETIC_TIMING = pytest.mark.benchmark(max_time=0.5)
SCAN_TIMING = pytest.mark.benchmark(max_time=1.0, min_rounds=5)


def _contender(name: str, *modules: ModuleType) -> SimpleNamespace:
    """A namespace of TIMED_FUNCTIONS taken from the first of modules that has each."""
    functions = {
        function: next(getattr(m, function) for m in modules if hasattr(m, function)) for function in TIMED_FUNCTIONS
    }
    return SimpleNamespace(name=name, **functions)


def _twin(implementation: str) -> SimpleNamespace:
    from zodb_json_codec import _impl

    return _contender(implementation, *_impl.import_twin(implementation))


@pytest.fixture(scope="session", params=["pickle", "python", "cython"])
def twin(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The pickle baseline or one twin: name plus the TIMED_FUNCTIONS.

    As tests/conftest.py's ``impl``: the compiled twin is skipped, with the
    reason shown, when it is not built or pure mode is asked for, and fails
    when ZODB_JSON_CODEC_PURE_PYTHON=0 (or PURE_PYTHON=0) requires it.
    """
    from zodb_json_codec import _impl

    implementation = request.param
    if implementation == "pickle":
        return _contender("pickle", baseline)
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


@pytest.fixture(
    scope="session",
    params=[pytest.param(name, id=name, marks=SYNTHETIC_TIMING) for name in datasets.SYNTHETIC_NAMES]
    + [pytest.param(name, id=name, marks=SCAN_TIMING) for name in datasets.FS_NAMES],
)
def dataset(request: pytest.FixtureRequest) -> List[bytes]:
    """The records of one dataset: a synthetic shape (one record) or a whole FileStorage scan."""
    return datasets.load(request.param)


@pytest.fixture
def records(twin: SimpleNamespace, dataset: List[bytes]) -> List[bytes]:
    """The dataset, once the contender is known to read it.

    The C unpickler must import every class a record names; where the
    corpus's application classes are not importable (public.fs), the pickle
    baseline is skipped with the reason, rather than timed on something else.
    """
    if twin.name == "pickle":
        try:
            for data in dataset:
                baseline.decode_zodb_record(data)
        except (ImportError, AttributeError) as exc:
            pytest.skip(f"pickle cannot load these records without their classes: {exc}")
    return dataset


def _each(function: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
    return [function(item) for item in items]


@pytest.fixture
def time_each(benchmark) -> Callable[[Callable[[Any], Any], Sequence[Any]], List[Any]]:
    """time_each(function, items): benchmark one pass of function over all items, and return its results.

    A pass is the unit timed, so a scan's time is per scan; extra_info's
    ``records`` gives the time per record (mean / records).
    """

    def run(function: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
        benchmark.extra_info["records"] = len(items)
        results = benchmark(_each, function, items)
        assert len(results) == len(items)
        return results

    return run
