"""The module layout of docs/design.md holds: every module imports only what its row allows.

The table in docs/design.md ("Module layout") is the rule; this test reads
it, so that the document and the code cannot drift apart.  Python modules
are read with ``ast`` (imports inside functions count too); Cython files
(.pyx, .pxd), which ``ast`` cannot parse, by their import lines and the
headers they take C from (``cdef extern from "_utf8.h"``); C headers by
their ``#include "..."`` lines.
"""

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "src" / "zodb_json_codec"
PACKAGE = "zodb_json_codec"
DESIGN = ROOT / "docs" / "design.md"

DB_GROUP = "_db/*"


def module_files() -> Dict[str, Path]:
    """Module name relative to the package ("_common", "_db/pg") -> its source file."""
    files = {}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.suffix == ".h":  # a header is named with its suffix, as it is included
            files[path.relative_to(PACKAGE_DIR).as_posix()] = path
        elif path.suffix in (".py", ".pyx", ".pxd") and "__pycache__" not in path.parts:
            name = path.relative_to(PACKAGE_DIR).with_suffix("").as_posix()
            if name == "_db/__init__":
                name = "_db"
            files[name] = path
    return files


def allowed_imports() -> Dict[str, Set[str]]:
    """The "may import" column of the table, by module (or "_db/*")."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## Module layout", 1)[1].split("\n## ", 1)[0]
    rules = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[^`]+`", cells[0]):
            continue
        may = cells[2]
        rules[cells[0].strip("`")] = set() if may == "nothing" else set(re.findall(r"`([^`]+)`", may))
    return rules


def group(name: str) -> str:
    """The table row that covers a module."""
    return DB_GROUP if name == "_db" or name.startswith("_db/") else name


def resolve(importer: str, level: int, module: str) -> str:
    """An import as a module name relative to the package; absolute ones of the package too."""
    if level == 0:
        if module == PACKAGE:
            return PACKAGE
        if not module.startswith(PACKAGE + "."):
            return ""  # stdlib or a third-party module
        return module[len(PACKAGE) + 1:].replace(".", "/")
    base = importer.split("/")[:-1] if importer != "_db" else ["_db"]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    parts = base + (module.split(".") if module else [])
    return "/".join(parts) or PACKAGE


def submodule_or(target: str, imported: str) -> str:
    """``from target import imported``: the submodule when there is one ("from . import _known"), else target."""
    prefix = "" if target == PACKAGE else target + "/"
    return prefix + imported if prefix + imported in FILES else target


def python_imports(name: str, path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield resolve(name, 0, alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(name, node.level, node.module or "")
            for alias in node.names:
                yield submodule_or(target, alias.name)


_CYTHON_FROM = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+c?import\s+\(?([\w, *]+)", re.M)
_CYTHON_EXTERN = re.compile(r'^\s*cdef\s+extern\s+from\s+"([\w.]+)"', re.M)
_C_INCLUDE = re.compile(r'^\s*#\s*include\s+"([\w.]+)"', re.M)


def cython_imports(name: str, path: Path) -> Iterator[str]:
    text = path.read_text(encoding="utf-8")
    for dots, module, names in _CYTHON_FROM.findall(text):
        target = resolve(name, len(dots), module)
        for alias in names.split(","):
            yield submodule_or(target, alias.split(" as ")[0].strip())
    yield from (header for header in _CYTHON_EXTERN.findall(text) if header in FILES)


def c_includes(path: Path) -> Iterator[str]:
    """The package's own headers a header includes ("Python.h" and the C library's are not the package's)."""
    return (header for header in _C_INCLUDE.findall(path.read_text(encoding="utf-8")) if header in FILES)


def imports(name: str, path: Path) -> Set[str]:
    if path.suffix == ".h":
        found = c_includes(path)
    else:
        found = python_imports(name, path) if path.suffix == ".py" else cython_imports(name, path)
    return {target for target in found if target and target != name}


FILES = module_files()
RULES = allowed_imports()


def test_the_table_lists_every_module():
    assert set(RULES) >= {group(name) for name in FILES}, "modules missing from docs/design.md"
    assert {group(name) for name in FILES} >= set(RULES) - {DB_GROUP}, "rows for modules that do not exist"


@pytest.mark.parametrize("name", sorted(FILES))
def test_imports_follow_the_layout(name):
    allowed = RULES[group(name)]
    forbidden = sorted(
        target for target in imports(name, FILES[name])
        if target not in allowed and group(target) not in allowed
    )
    assert not forbidden, f"{name} imports {forbidden}; docs/design.md allows only {sorted(allowed)}"


def test_the_checker_sees_imports():
    """The parser finds imports of every kind, so the rules above are really checked."""
    assert imports("_decode_python", FILES["_decode_python"]) >= {"_common", "_known", "_decode_known"}
    assert "_opcodes" in imports("_decode_cython", FILES["_decode_cython"])
    assert "_decode_known" in imports("_decode_cython", FILES["_decode_cython"])
    assert imports("_db/verify", FILES["_db/verify"]) >= {PACKAGE, "_db/fidelity", "_db", "_jsonread"}
    assert imports("cli", FILES["cli"]) >= {PACKAGE, "_db", "_db/jsonl", "_db/pg"}


def test_the_size_script_counts_the_whole_compiled_side():
    """scripts/twin-size (docs/design.md, "Two twins") counts every line of every compiled file, once."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "twin-size")], capture_output=True, text=True,
                          check=True)
    counted = {}
    for line in done.stdout.splitlines():
        found = re.fullmatch(r"\s*(\d+)  (the compiled twins|the lane and the reader|the Python twin modules)\b.*",
                             line)
        if found:
            counted[found.group(2)] = int(found.group(1))
    compiled = [p for p in PACKAGE_DIR.iterdir() if p.suffix in (".pyx", ".pxd", ".h", ".pxi")]
    assert len(compiled) >= 10
    total = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in compiled)
    assert counted["the compiled twins"] + counted["the lane and the reader"] == total
    assert counted["the Python twin modules"] > 1000


def test_the_compiled_side_is_within_its_budget():
    """docs/design.md, "Two twins": the lane and the reader under 2,000 lines, the rest at most 2.5 times the
    Python twin modules.  A change past either budget makes room elsewhere first."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "twin-size"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout
