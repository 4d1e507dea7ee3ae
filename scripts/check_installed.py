"""Run the test suite against the installed package (a wheel), never the source tree beside it.

    python scripts/check_installed.py [--expect cython|python] [--postgresql required|if-present] [PYTEST ARGS]

Run from a source tree (a checkout or an unpacked sdist) whose ``tests/``
should run, in an environment where zodb-json-codec is installed from a
wheel.  It checks first that ``zodb_json_codec`` is imported from the
environment's site-packages (not from ``src/``) and that ``IMPLEMENTATION``
is what ``--expect`` says (default ``cython``; with
``ZODB_JSON_CODEC_PURE_PYTHON=0`` the import itself fails if the compiled
twins do not load), then runs pytest on ``tests/``.

The jsonb round trips need PostgreSQL's server programs.  With
``--postgresql if-present`` (for builders that have none, such as
cibuildwheel's macOS and Windows machines) the tests that need a server
are deselected when none is found, and the report says how many; the
default, ``required``, runs them and fails them as the suite does.

Used by scripts/build-wheels and by cibuildwheel's test step
(pyproject.toml, ``[tool.cibuildwheel]``).
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def check_import(expect: str) -> None:
    import zodb_json_codec

    location = Path(zodb_json_codec.__file__).resolve()
    site = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    print(f"zodb_json_codec {zodb_json_codec.__version__} from {location.parent}, "
          f"implementation: {zodb_json_codec.IMPLEMENTATION}")
    if not any(directory in location.parents for directory in site):
        sys.exit(f"check_installed: zodb_json_codec is not the installed one (site-packages: {sorted(map(str, site))})")
    if zodb_json_codec.IMPLEMENTATION != expect:
        sys.exit(f"check_installed: IMPLEMENTATION is {zodb_json_codec.IMPLEMENTATION!r}, expected {expect!r}")


def postgresql_missing() -> str:
    """Why no PostgreSQL server can be started here, or "" if its programs are there."""
    sys.path.insert(0, str(TESTS))
    from pgserver import PgServerError, find_bindir

    try:
        find_bindir()
    except PgServerError as exc:
        return str(exc)
    return ""


class DeselectPostgresqlTests:
    """Leaves out the tests that use the pg_dsn fixture (a throwaway PostgreSQL), saying so."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.deselected: List[str] = []

    def pytest_collection_modifyitems(self, config, items) -> None:
        keep = [item for item in items if "pg_dsn" not in getattr(item, "fixturenames", ())]
        gone = [item for item in items if item not in keep]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep
            self.deselected = [item.nodeid for item in gone]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_line(
            f"check_installed: {len(self.deselected)} tests that need PostgreSQL deselected: {self.reason}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expect", choices=("cython", "python"), default="cython")
    ap.add_argument("--postgresql", choices=("required", "if-present"), default="required")
    args, pytest_args = ap.parse_known_args()
    check_import(args.expect)

    import pytest

    plugins = []
    if args.postgresql == "if-present":
        missing = postgresql_missing()
        if missing:
            # The deselection runs where tests are collected: not in pytest-xdist's workers.
            if any(arg.startswith(("-n", "--numprocesses")) for arg in pytest_args):
                sys.exit("check_installed: --postgresql if-present cannot deselect under pytest-xdist's -n")
            plugins.append(DeselectPostgresqlTests(missing))
    return pytest.main(["-p", "no:cacheprovider", "--rootdir", str(ROOT), str(TESTS), *pytest_args], plugins=plugins)


if __name__ == "__main__":
    sys.exit(main())
