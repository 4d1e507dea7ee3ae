"""Choosing the implementation: the PURE_PYTHON tri-state, warnings for broken builds, cheap imports.

The build reads the same function (tests/test_build.py builds wheels under these settings).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import types

import pytest

import zodb_json_codec
from zodb_json_codec import _impl

VARS = ("ZODB_JSON_CODEC_PURE_PYTHON", "PURE_PYTHON", "ZODB_JSON_CODEC_REQUIRE_EXT")
PYPY = sys.implementation.name == "pypy"
CYTHON_BUILT = all(
    importlib.util.find_spec(f"zodb_json_codec.{name}") is not None for name in _impl.TWINS["cython"]
)

# A meta path finder that makes the Cython twin's modules look installed but broken
# (as an extension built for another Python would be), or installed and
# working for the decoder only (an incomplete build).
FAKE_CYTHON = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, sys

    ASKED = []  # the fake modules looked for, in order

    class Fake(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def __init__(self, modules):
            self.modules = modules
        def find_spec(self, name, path, target=None):
            if name in self.modules:
                ASKED.append(name)
                return importlib.machinery.ModuleSpec(name, self)
            return None
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            if self.modules[module.__name__] == "broken":
                raise ImportError("undefined symbol: PyFake_Broken")
            if self.modules[module.__name__] == "missing":  # hides a real build of it
                raise ModuleNotFoundError(f"No module named {module.__name__!r}", name=module.__name__)
            for name in ("decode_zodb_record", "decode_zodb_record_for_pg",
                         "decode_zodb_record_for_pg_json", "pickle_to_dict", "pickle_to_json"):
                setattr(module, name, lambda *a: None)

    sys.meta_path.insert(0, Fake(MODULES))
    """
)


# Makes the child look like CPython to _impl (sys.implementation.name is all
# it asks), so that on PyPy, too, the tri-state and the choice of the Python twin are tested.
AS_CPYTHON = textwrap.dedent(
    """
    import sys, types
    _fake = types.SimpleNamespace(**vars(sys.implementation))
    _fake.name = "cpython"
    sys.implementation = _fake
    """
)


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter with only the given tri-state variables set."""
    clean = {k: v for k, v in os.environ.items() if k not in VARS}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code], env=clean, capture_output=True, text=True, timeout=120
    )


def implementation(env: dict[str, str], prelude: str = "") -> subprocess.CompletedProcess:
    return run(prelude + "\nimport zodb_json_codec\nprint(zodb_json_codec.IMPLEMENTATION)", env)


BOTH_BROKEN = {"zodb_json_codec._decode_cython": "broken", "zodb_json_codec._encode_cython": "broken"}


def assert_pypy_runs_python(env: dict[str, str], modules: dict[str, str] = BOTH_BROKEN) -> None:
    """On PyPy: the Python twin, silently, without even looking for the Cython twin (broken or required)."""
    proc = run(f"MODULES = {modules!r}\n" + FAKE_CYTHON
               + "\nimport zodb_json_codec\nprint(zodb_json_codec.IMPLEMENTATION)\nprint(ASKED)", env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["python", "[]"], proc.stdout
    assert "Warning" not in proc.stderr


def assert_requested_mode(monkeypatch, expected: str) -> None:
    """The environment as set asks for expected (on PyPy: python, and expected when _impl is told it is CPython)."""
    if PYPY:
        # PyPy runs the Python twin whatever is asked; the table holds for
        # the other interpreters, which _impl tells apart by name alone.
        assert _impl.requested_mode() == _impl.PYTHON
        fake = types.SimpleNamespace(**vars(sys.implementation))
        fake.name = "cpython"
        monkeypatch.setattr(sys, "implementation", fake)
    assert _impl.requested_mode() == expected


@pytest.mark.parametrize(
    "specific, generic, expected",
    [
        (None, None, _impl.AUTO),
        ("", None, _impl.AUTO),
        ("", "", _impl.AUTO),
        ("0", None, _impl.CYTHON),
        (" 0 ", None, _impl.CYTHON),
        ("1", None, _impl.PYTHON),
        ("true", None, _impl.PYTHON),
        # "Anything else" means anything: the value is text, not a boolean.
        ("false", None, _impl.PYTHON),
        ("no", None, _impl.PYTHON),
        ("00", None, _impl.PYTHON),
        (None, "0", _impl.CYTHON),
        (None, "1", _impl.PYTHON),
        ("", "1", _impl.PYTHON),  # empty counts as unset, so PURE_PYTHON decides
        ("1", "0", _impl.PYTHON),  # the package's own variable wins
        ("0", "1", _impl.CYTHON),
    ],
)
def test_requested_mode(monkeypatch, specific, generic, expected):
    monkeypatch.delenv("ZODB_JSON_CODEC_REQUIRE_EXT", raising=False)
    for name, value in zip(VARS, (specific, generic)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert_requested_mode(monkeypatch, expected)


@pytest.mark.parametrize(
    "require, pure_python, expected",
    [
        ("1", None, _impl.CYTHON),
        ("yes", None, _impl.CYTHON),  # any text but "" and "0", as for PURE_PYTHON
        (" 1 ", None, _impl.CYTHON),
        ("0", None, _impl.AUTO),
        ("", None, _impl.AUTO),
        (" ", None, _impl.AUTO),
        ("1", "0", _impl.CYTHON),
        ("1", "1", _impl.PYTHON),  # asking for the Python twin wins: nothing is built, nothing required
        ("0", "0", _impl.CYTHON),
    ],
)
def test_require_ext(monkeypatch, require, pure_python, expected):
    """ZODB_JSON_CODEC_REQUIRE_EXT, the build's old spelling of "required", means it at import too."""
    monkeypatch.delenv("PURE_PYTHON", raising=False)
    monkeypatch.setenv("ZODB_JSON_CODEC_REQUIRE_EXT", require)
    if pure_python is None:
        monkeypatch.delenv("ZODB_JSON_CODEC_PURE_PYTHON", raising=False)
    else:
        monkeypatch.setenv("ZODB_JSON_CODEC_PURE_PYTHON", pure_python)
    assert_requested_mode(monkeypatch, expected)


def test_one_switch_for_build_and_import():
    """_impl asks _switch, and _switch imports nothing of the package: setup.py loads it by its path."""
    from zodb_json_codec import _switch

    assert _impl.requested_mode is _switch.requested_mode
    proc = run(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('switch', {_switch.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(module.requested_mode(), sorted(m for m in sys.modules if m.startswith('zodb_json_codec')))",
        {"ZODB_JSON_CODEC_REQUIRE_EXT": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["python" if PYPY else "cython", "[]"]


@pytest.mark.parametrize("value", [None, "", "0", "1"])
def test_pypy_always_runs_the_python_twin(monkeypatch, value):
    fake = types.SimpleNamespace(**vars(sys.implementation))
    fake.name = "pypy"
    monkeypatch.setattr(sys, "implementation", fake)
    monkeypatch.delenv("PURE_PYTHON", raising=False)
    if value is None:
        monkeypatch.delenv("ZODB_JSON_CODEC_PURE_PYTHON", raising=False)
    else:
        monkeypatch.setenv("ZODB_JSON_CODEC_PURE_PYTHON", value)
    assert _impl.requested_mode() == _impl.PYTHON


@pytest.mark.parametrize(
    "env", [{"ZODB_JSON_CODEC_PURE_PYTHON": "1"}, {"PURE_PYTHON": "1"}, {"ZODB_JSON_CODEC_PURE_PYTHON": "yes", "PURE_PYTHON": "0"}]
)
def test_asking_for_python_uses_python(env):
    proc = implementation(env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python"
    assert "Warning" not in proc.stderr


def test_default_uses_cython_when_built():
    proc = implementation({})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("cython" if CYTHON_BUILT else "python")
    assert "Warning" not in proc.stderr  # a twin that is simply not built is no news


@pytest.mark.parametrize("env", [{"ZODB_JSON_CODEC_PURE_PYTHON": "0"}, {"ZODB_JSON_CODEC_REQUIRE_EXT": "1"}])
def test_required_cython(env):
    if PYPY:
        assert_pypy_runs_python(env)  # "0" asks for nothing PyPy would run
        proc = implementation(env, AS_CPYTHON)
    else:
        proc = implementation(env)
    if CYTHON_BUILT:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "cython"
    else:
        assert proc.returncode != 0
        assert "ModuleNotFoundError" in proc.stderr and "_decode_cython" in proc.stderr


@pytest.mark.parametrize(
    "modules",
    [
        {"zodb_json_codec._decode_cython": "broken"},
        {"zodb_json_codec._decode_cython": "broken", "zodb_json_codec._encode_cython": "broken"},
        # Built incompletely: the decoder imports, the encoder is missing.
        {"zodb_json_codec._decode_cython": "working", "zodb_json_codec._encode_cython": "missing"},
    ],
    ids=["decoder-broken", "both-broken", "encoder-missing"],
)
def test_broken_cython_twin_warns_and_uses_python(modules):
    prelude = f"MODULES = {modules!r}\n" + FAKE_CYTHON
    if PYPY:
        assert_pypy_runs_python({}, modules)  # a broken build PyPy never imports is no news
        prelude = AS_CPYTHON + prelude
    proc = implementation({}, prelude)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python"
    assert "RuntimeWarning" in proc.stderr
    assert "Cython twin is installed but does not import" in proc.stderr


@pytest.mark.parametrize("env", [{"ZODB_JSON_CODEC_PURE_PYTHON": "0"}, {"ZODB_JSON_CODEC_REQUIRE_EXT": "1"}])
def test_broken_cython_twin_is_an_error_when_required(env):
    modules = {"zodb_json_codec._decode_cython": "broken"}
    prelude = f"MODULES = {modules!r}\n" + FAKE_CYTHON
    if PYPY:
        assert_pypy_runs_python(env, modules)
        prelude = AS_CPYTHON + prelude
    proc = implementation(env, prelude)
    assert proc.returncode != 0
    assert "ImportError: undefined symbol: PyFake_Broken" in proc.stderr


def test_public_api():
    assert set(zodb_json_codec.__all__) == {
        "IMPLEMENTATION", "__version__", *_impl.DECODE_FUNCTIONS, *_impl.ENCODE_FUNCTIONS,
        "GlobalRefused", "GlobalsPolicy", "get_globals_policy", "set_globals_policy",
    }
    assert zodb_json_codec.IMPLEMENTATION in ("python", "cython")
    decode, encode = _impl.import_twin(zodb_json_codec.IMPLEMENTATION)
    for name in _impl.DECODE_FUNCTIONS:
        assert getattr(zodb_json_codec, name) is getattr(decode, name)
    for name in _impl.ENCODE_FUNCTIONS:
        assert getattr(zodb_json_codec, name) is getattr(encode, name)


def test_version_matches_metadata():
    from importlib import metadata

    try:
        installed = metadata.version("zodb-json-codec")
    except metadata.PackageNotFoundError:
        pytest.skip("zodb-json-codec is not installed (run from a source tree)")
    assert installed == zodb_json_codec.__version__


def test_imports_are_cheap():
    """A Zope add-on may import the codec at start-up: nothing heavy comes with it, CLI included."""
    proc = run(
        "import sys, zodb_json_codec, zodb_json_codec.cli\n"
        "heavy = ('ZODB', 'persistent', 'BTrees', 'transaction', 'zodbpickle', 'psycopg', 'zodb_json_codec._db.fidelity')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
