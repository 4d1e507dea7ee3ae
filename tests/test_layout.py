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


def test_every_window_says_why_it_is_safe_and_the_table_is_current():
    """docs/design.md, "Where Python code can run": each function of the compiled twins that reads through a
    borrowed reference, an unchecked index or a raw buffer has its '# window:' comment, and the table is
    the one scripts/windows_table.py makes from them."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "windows_table.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_window_scan_finds_what_it_is_for(tmp_path, monkeypatch):
    """The scan flags a borrowed read, an unchecked index and a raw buffer without a comment, and takes a
    bounds-checked function's index as a window too: a new window cannot go unsaid."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("windows_table", ROOT / "scripts" / "windows_table.py")
    windows = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "windows_table", windows)  # dataclasses look their module up
    spec.loader.exec_module(windows)
    source = tmp_path / "_probe.pyx"
    source.write_text(
        "cdef object borrowed(list items):\n    return <object>PyList_GET_ITEM(items, 0)\n\n\n"
        "cdef object unchecked(list items):\n    return items[1]\n\n\n"
        "cdef object raw(str s):\n    return PyUnicode_DATA(s)[0]\n\n\n"
        "@cython.boundscheck(True)\ncdef object checked(_Context ctx):\n    return ctx.memo[2]\n\n\n"
        "cdef object said(list items):\n    # window: items | nothing runs\n    return items[0]\n\n\n"
        "cdef object plain(object x):\n    return x\n", encoding="utf-8")
    found = {fn.name: (fn.reads, fn.note) for fn in windows.scan(source)[0]}
    assert found == {
        "borrowed": (["PyList_GET_ITEM"], None),
        "unchecked": (["unchecked list index"], None),
        "raw": (["raw buffer"], None),
        "checked": (["bounds-checked list index"], None),
        "said": (["unchecked list index"], "items | nothing runs"),
    }
