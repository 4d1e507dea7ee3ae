"""Declares the optional Cython twins; all metadata lives in pyproject.toml.

Every ``src/zodb_json_codec/*.pyx`` becomes an optional extension: a machine
without a compiler (or without Cython) installs the pure-Python package.
Environment:

``ZODB_JSON_CODEC_PURE_PYTHON`` (else ``PURE_PYTHON``)
    unset or empty: build if possible; ``"0"``: the compiled twins are
    required, a failed build is an error; anything else: build nothing.
``ZODB_JSON_CODEC_REQUIRE_EXT``
    anything but unset, empty or ``"0"``: a failed build is an error.

Nothing is built on PyPy, which always runs the pure twins.
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE / "src" / "zodb_json_codec"


def _pure_python_setting():
    """The tri-state text of the environment, parsed as zodb_json_codec._impl does."""
    value = os.environ.get("ZODB_JSON_CODEC_PURE_PYTHON", "").strip()
    if not value:
        value = os.environ.get("PURE_PYTHON", "").strip()
    return value


IS_PYPY = sys.implementation.name == "pypy"
PURE_SETTING = _pure_python_setting()
PURE = IS_PYPY or PURE_SETTING not in ("", "0")
REQUIRE = not PURE and (
    PURE_SETTING == "0" or os.environ.get("ZODB_JSON_CODEC_REQUIRE_EXT", "").strip() not in ("", "0")
)

try:
    from Cython.Distutils import build_ext as cython_build_ext
except ImportError:
    cython_build_ext = None


# Cython's build_ext cythonizes inside build_extension, so a .pyx that does
# not compile is a failure of that one optional extension.
_build_ext_base = cython_build_ext or build_ext


class optional_build_ext(_build_ext_base):
    """A failed build warns and leaves the pure package, unless the twins are required."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no usable compiler at all fails before any extension
            if REQUIRE:
                raise
            self._warn_failed("the compiled twins", exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # compiler, linker or Cython error
            if REQUIRE:
                raise
            self._warn_failed(ext.name, exc)

    def _warn_failed(self, what, exc):
        self.warn(
            f"building {what} failed ({type(exc).__name__}: {exc}); "
            "zodb_json_codec will use its pure-Python twin"
        )


def extensions():
    if PURE:
        return []
    sources = sorted(PACKAGE_DIR.glob("*.pyx"))
    if sources and cython_build_ext is None:
        if REQUIRE:
            raise RuntimeError("the compiled twins are required, but Cython is not installed")
        print("Cython is not installed; zodb_json_codec will use its pure-Python twin", file=sys.stderr)
        return []
    exts = []
    for source in sources:
        ext = Extension(
            f"zodb_json_codec.{source.stem}",
            [source.relative_to(HERE).as_posix()],
            optional=not REQUIRE,
        )
        ext.cython_directives = {"language_level": "3"}
        exts.append(ext)
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": optional_build_ext})
