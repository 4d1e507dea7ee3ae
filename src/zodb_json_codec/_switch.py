"""What the environment asks for: the Cython twins if they are there, required, or the Python twin.

One function read by the build (setup.py loads this file by its path: building
never imports the package) and at import (``_impl``), so that a variable means
the same to both.  It imports nothing but ``os`` and ``sys``.

* ``ZODB_JSON_CODEC_PURE_PYTHON``, or ``PURE_PYTHON`` when that is unset or
  empty (zope's convention, as ``persistent._compat``): ``"0"`` requires the
  Cython twins, any other non-empty text asks for the Python twin;
* ``ZODB_JSON_CODEC_REQUIRE_EXT``: any text but ``""`` and ``"0"`` requires
  the Cython twins too, unless the Python twin is asked for;
* PyPy always runs the Python twin, whatever is asked.

Values are compared as text on purpose: ``bool("0")`` is true, a bug that
once left zope's C code untested for years.
"""

import os
import sys

AUTO, CYTHON, PYTHON = "auto", "cython", "python"

#: The line a build that fell back to the Python twin prints; also in the docs.
HOW_TO_COMPILE = (
    "install a C compiler (gcc or clang and the Python headers; Xcode's command line tools; "
    "MSVC Build Tools) and reinstall with 'pip install --no-cache-dir --no-binary zodb-json-codec "
    "--force-reinstall zodb-json-codec', or set ZODB_JSON_CODEC_REQUIRE_EXT=1 to make this an error"
)


def _setting(name: str) -> str:
    return os.environ.get(name, "").strip()


def requested_mode() -> str:
    """AUTO (the Cython twins when built, else the Python twins), CYTHON (required) or PYTHON."""
    if sys.implementation.name == "pypy":
        return PYTHON
    pure = _setting("ZODB_JSON_CODEC_PURE_PYTHON") or _setting("PURE_PYTHON")
    if pure:
        return CYTHON if pure == "0" else PYTHON
    if _setting("ZODB_JSON_CODEC_REQUIRE_EXT") not in ("", "0"):
        return CYTHON
    return AUTO
