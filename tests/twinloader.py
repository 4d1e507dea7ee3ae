"""One twin's eight functions, or a skip or failure saying why the Cython twin cannot be had.

Used by tests/conftest.py's ``impl`` fixture, tests/test_twins.py and the
benchmarks' ``twin`` fixture, so all three decide alike.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest


def twin_functions(implementation: str) -> SimpleNamespace:
    """The twin's functions (plus name, decode_module, encode_module); ImportError if it cannot be had."""
    from zodb_json_codec import _impl

    decode, encode = _impl.import_twin(implementation)
    functions = {name: getattr(decode, name) for name in _impl.DECODE_FUNCTIONS}
    functions.update({name: getattr(encode, name) for name in _impl.ENCODE_FUNCTIONS})
    return SimpleNamespace(name=implementation, decode_module=decode, encode_module=encode, **functions)


def load_twin(implementation: str) -> SimpleNamespace:
    """The twin's functions (plus name, decode_module, encode_module).

    The Cython twin is skipped, with the reason shown, when it is not
    built or the Python twin is asked for, and fails the test when
    ZODB_JSON_CODEC_PURE_PYTHON=0 (or PURE_PYTHON=0) requires it or it is
    installed but broken.
    """
    from zodb_json_codec import _impl

    if implementation == "python":
        return twin_functions("python")
    mode = _impl.requested_mode()
    if mode == _impl.PYTHON:
        if sys.implementation.name == "pypy":
            pytest.skip("Cython twin: PyPy always runs the Python twin")
        pytest.skip("Cython twin: the Python twin requested (ZODB_JSON_CODEC_PURE_PYTHON / PURE_PYTHON)")
    try:
        return twin_functions("cython")
    except ImportError as exc:
        if mode == _impl.CYTHON:
            pytest.fail(f"Cython twin required (ZODB_JSON_CODEC_PURE_PYTHON=0) but not importable: {exc}")
        if _impl.cython_installed():
            pytest.fail(f"Cython twin installed but broken: {exc}")
        pytest.skip(f"Cython twin not built: {exc}")
