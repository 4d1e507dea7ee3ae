"""Building the package: a wheel holds the Cython twins this very build made, or none and says so.

Real builds of a copy of the source tree, in child processes, the way pip
builds an sdist (``pip wheel`` without build isolation, so nothing is
downloaded; the test environment has setuptools and Cython).  A build that
cannot compile gives a ``py3-none-any`` wheel with one warning line, or fails
when the Cython twins are required; what an earlier build left in
``build/`` never gets into a wheel.  The settings are read by the same
function at build time and at import (``zodb_json_codec._switch``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from zodb_json_codec import _switch

ROOT = Path(__file__).resolve().parent.parent
PYPY = sys.implementation.name == "pypy"
MODULES = ("_decode_cython", "_encode_cython", "_jsontext_cython", "_pickletext_cython")
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# Variables a build reads; the children get only those a test sets.
BUILD_VARS = (
    "ZODB_JSON_CODEC_PURE_PYTHON", "PURE_PYTHON", "ZODB_JSON_CODEC_REQUIRE_EXT",
    "CC", "LDSHARED", "CFLAGS", "LDFLAGS", "CPPFLAGS",
)
WARNING = "WARNING: zodb-json-codec:"
REQUIRED_ERROR = "CythonTwinsUnavailable: the Cython twins of zodb-json-codec are required, but"

pytestmark = [pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="no source tree beside the tests"),
              pytest.mark.slow]  # builds: minutes
# CC=false stands for "no compiler"; setuptools' MSVC support does not read CC.
compiler_from_cc = pytest.mark.skipif(sys.platform == "win32", reason="MSVC does not take its compiler from CC")


@dataclass
class Build:
    returncode: int
    output: str
    wheels: List[Path]

    @property
    def wheel(self) -> Path:
        assert self.returncode == 0, self.output[-3000:]
        assert len(self.wheels) == 1, self.wheels
        return self.wheels[0]

    def warnings(self) -> List[str]:
        return [line.strip() for line in self.output.splitlines() if WARNING in line]


def child_env(settings: Dict[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in BUILD_VARS}
    env.update(settings, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def source_tree(tmp_path: Path) -> Path:
    """A copy of what an sdist holds to build from, without anything built."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "*.html", "__pycache__", "*.egg-info"),
    )
    return tree


def pip_wheel(source: Path, out: Path, settings: Dict[str, str]) -> Build:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "--no-index",
         "--no-cache-dir", "-w", str(out), str(source)],
        env=child_env(settings), capture_output=True, text=True, timeout=900,
    )
    wheels = sorted(out.glob("*.whl")) if out.exists() else []
    return Build(proc.returncode, proc.stdout + proc.stderr, wheels)


def tags(wheel: Path) -> str:
    """The wheel's python-abi-platform tags, from its name."""
    return "-".join(wheel.stem.split("-")[-3:])


def cython_modules(wheel: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist() if name.endswith((".so", ".pyd"))}


def root_is_purelib(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        wheel_file = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
        return "Root-Is-Purelib: true" in zf.read(wheel_file).decode()


def assert_pure_wheel(wheel: Path) -> None:
    assert tags(wheel) == "py3-none-any"
    assert cython_modules(wheel) == {}
    assert root_is_purelib(wheel)


def build_lib(tree: Path) -> Path:
    """Where setuptools puts a build's extensions (build/lib.<platform>-<tag>)."""
    proc = subprocess.run(
        [sys.executable, "-c",
         "from setuptools.dist import Distribution\n"
         "build = Distribution().get_command_obj('build'); build.ensure_finalized(); print(build.build_platlib)"],
        cwd=tree, capture_output=True, text=True, check=True,
    )
    return tree / proc.stdout.strip()


def plant_stale_modules(tree: Path) -> List[Path]:
    """Files an earlier build could have left, newer than every source: what a build must not pack."""
    planted = []
    for directory in (build_lib(tree) / "zodb_json_codec", tree / "src" / "zodb_json_codec"):
        directory.mkdir(parents=True, exist_ok=True)
        for module in MODULES:
            path = directory / f"{module}{EXT_SUFFIX}"
            path.write_bytes(b"stale module of an earlier build")
            future = path.stat().st_mtime + 3600
            os.utime(path, (future, future))
            planted.append(path)
    return planted


def mode_under(monkeypatch: pytest.MonkeyPatch, settings: Dict[str, str]) -> str:
    for name in ("ZODB_JSON_CODEC_PURE_PYTHON", "PURE_PYTHON", "ZODB_JSON_CODEC_REQUIRE_EXT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    return _switch.requested_mode()


def working_compiler() -> Optional[List[str]]:
    """The C compiler setuptools would call here, if it is installed."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "")
    return cc if cc and shutil.which(cc[0]) else None


@compiler_from_cc
def test_sdist_without_compiler_installs_the_python_twin(tmp_path):
    """pip install from the sdist on a machine without a compiler: the Python twin, and one line saying how to get the other."""
    tree = source_tree(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", "from setuptools import build_meta; print(build_meta.build_sdist('dist'))"],
        cwd=tree, env=child_env({}), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    sdist = tree / "dist" / proc.stdout.strip().splitlines()[-1]

    build = pip_wheel(sdist, tmp_path / "wheels", {"CC": "false"})
    assert_pure_wheel(build.wheel)
    if PYPY:
        assert build.warnings() == []  # PyPy never builds the Cython twins: nothing was missed
    else:
        [line] = build.warnings()
        assert "there is no working C compiler" in line and "Python twin" in line
        assert "pip install --no-cache-dir --no-binary zodb-json-codec --force-reinstall zodb-json-codec" in line
        assert "ZODB_JSON_CODEC_REQUIRE_EXT=1" in line

    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(build.wheel)],
        env=child_env({}), capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr
    proc = subprocess.run(
        [sys.executable, "-c", "import zodb_json_codec as z; print(z.IMPLEMENTATION, z.__file__)"],
        env=child_env({"PYTHONPATH": str(target)}), capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    implementation, location = proc.stdout.split()
    assert implementation == "python"
    assert Path(location).is_relative_to(target)


@compiler_from_cc
@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"ZODB_JSON_CODEC_PURE_PYTHON": "0"},
        {"PURE_PYTHON": "0"},
        {"ZODB_JSON_CODEC_REQUIRE_EXT": "1"},
        {"ZODB_JSON_CODEC_REQUIRE_EXT": "0"},
        {"ZODB_JSON_CODEC_PURE_PYTHON": "1"},
        {"ZODB_JSON_CODEC_PURE_PYTHON": "false"},
        {"PURE_PYTHON": "1"},
        {"ZODB_JSON_CODEC_PURE_PYTHON": "1", "ZODB_JSON_CODEC_REQUIRE_EXT": "1"},
    ],
    ids=lambda settings: " ".join(f"{k}={v}" for k, v in settings.items()) or "nothing set",
)
def test_build_without_compiler_follows_the_switch(tmp_path, monkeypatch, settings):
    """What the import would ask for (_switch) decides the build: required fails, auto warns, python is silent."""
    mode = mode_under(monkeypatch, settings)
    build = pip_wheel(source_tree(tmp_path), tmp_path / "wheels", dict(settings, CC="false"))
    if mode == _switch.CYTHON:
        assert build.returncode != 0
        assert REQUIRED_ERROR in build.output
        assert build.wheels == []
    elif mode == _switch.AUTO:
        assert_pure_wheel(build.wheel)
        assert len(build.warnings()) == 1
    else:
        assert_pure_wheel(build.wheel)
        assert build.warnings() == []
        assert "probe.c" not in build.output  # nothing compiled, not even tried


@pytest.mark.skipif(PYPY, reason="PyPy builds nothing, with or without Cython")
@pytest.mark.parametrize("required", [False, True], ids=["auto", "required"])
def test_build_without_cython(tmp_path, required):
    """Cython missing from the build environment (it is a build requirement, but --no-build-isolation exists)."""
    blocker = tmp_path / "blocker" / "Cython"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('Cython blocked by the test')\n")
    settings = {"PYTHONPATH": str(blocker.parent)}
    if required:
        settings["ZODB_JSON_CODEC_REQUIRE_EXT"] = "1"
    build = pip_wheel(source_tree(tmp_path), tmp_path / "wheels", settings)
    if required:
        assert build.returncode != 0
        assert f"{REQUIRED_ERROR} Cython is not installed" in build.output
    else:
        assert_pure_wheel(build.wheel)
        [line] = build.warnings()
        assert "Cython is not installed" in line


@compiler_from_cc
def test_stale_modules_without_compiler(tmp_path):
    """build/ and the source tree hold modules of an earlier build: a build that compiles nothing packs none of them."""
    tree = source_tree(tmp_path)
    planted = plant_stale_modules(tree)
    build = pip_wheel(tree, tmp_path / "wheels", {"CC": "false"})
    assert_pure_wheel(build.wheel)
    if not PYPY:  # where the build declares extensions, it removes what stood for them
        assert not any(path.exists() for path in planted if build_lib(tree) in path.parents)


FAIL_ON_ENCODER = """#!{python}
import os, sys
if any("_encode_cython" in arg for arg in sys.argv[1:]):
    sys.exit("compiler refuses " + " ".join(sys.argv[1:]))
os.execvp({compiler}[0], {compiler} + sys.argv[1:])
"""


@pytest.mark.skipif(PYPY, reason="PyPy builds nothing")
@compiler_from_cc
@pytest.mark.skipif(working_compiler() is None, reason="no C compiler on this machine")
def test_cython_modules_are_fresh_or_absent(tmp_path):
    """With a compiler: every module rebuilt (never an earlier one taken as up to date), or none packed."""
    tree = source_tree(tmp_path)
    plant_stale_modules(tree)

    fresh = pip_wheel(tree, tmp_path / "fresh", {})
    modules = cython_modules(fresh.wheel)
    assert tags(fresh.wheel).startswith(f"cp{sys.version_info[0]}{sys.version_info[1]}-")
    assert not root_is_purelib(fresh.wheel)
    assert sorted(modules) == sorted(f"zodb_json_codec/{m}{EXT_SUFFIX}" for m in MODULES)
    assert all(b"stale module" not in content for content in modules.values())
    assert fresh.warnings() == []

    # Now build/ holds real modules, and one of the three does not compile.
    compiler = tmp_path / "fail-on-encoder"
    compiler.write_text(FAIL_ON_ENCODER.format(python=sys.executable, compiler=repr(working_compiler())))
    compiler.chmod(0o755)
    partial = pip_wheel(tree, tmp_path / "partial", {"CC": str(compiler)})
    assert_pure_wheel(partial.wheel)
    [line] = partial.warnings()
    assert "zodb_json_codec._encode_cython did not build" in line

    required = pip_wheel(tree, tmp_path / "required", {"CC": str(compiler), "ZODB_JSON_CODEC_REQUIRE_EXT": "1"})
    assert required.returncode != 0
    assert REQUIRED_ERROR in required.output
    assert required.wheels == []


#: What the builds without SIMD or AVX2 run: the tests that reach the C with a plain-C branch beside its SIMD ones
#: (UTF-8 checks and copies, JSON string runs and escapes, str to UTF-8).
PORTABLE_TESTS = ("tests/test_load_path.py", "tests/test_direct_lane.py", "tests/test_twins.py", "-k",
                  "utf8 or escape or wide or three_byte or width or bad_bytes or known_texts or generated_json"
                  " or text or str")
SIMD_SYMBOL = b"zjc_ucs4_block8_ssse3"  # a local symbol of the SIMD build's _encode_cython
AVX2_SYMBOL = b"zjc_json_run_avx2"  # and of its AVX2 loops


@pytest.mark.skipif(PYPY, reason="PyPy builds nothing")
@compiler_from_cc
@pytest.mark.skipif(working_compiler() is None, reason="no C compiler on this machine")
def test_plain_c_branches_without_simd(tmp_path):
    """CPUs and compilers without SSE2/SSSE3 (ARM, MSVC) take the plain-C branches: built here with
    -DZJC_NO_SIMD, which turns every SIMD branch off, they must pass the tests of the text they handle."""
    _text_tests_of_a_build(tmp_path, "-DZJC_NO_SIMD", without=SIMD_SYMBOL)


@pytest.mark.skipif(PYPY, reason="PyPy builds nothing")
@compiler_from_cc
@pytest.mark.skipif(working_compiler() is None, reason="no C compiler on this machine")
def test_sixteen_byte_branches_without_avx2(tmp_path):
    """x86-64 CPUs without AVX2 (before about 2013) take the plain-C UTF-8 checks and JSON string runs beside
    the SSSE3 str loops: built with -DZJC_NO_AVX2, they must pass the same tests."""
    _text_tests_of_a_build(tmp_path, "-DZJC_NO_AVX2", without=AVX2_SYMBOL)


def _text_tests_of_a_build(tmp_path, flag: str, without: bytes) -> None:
    """The twins built with CFLAGS=flag, whose encoder lacks the symbol without (the usual build has it),
    pass the tests of the text the SIMD branches handle; and CFLAGS from the environment come after
    Python's own, as in every distutils (setuptools 84 lets them replace Python's: -O0, asserts on)."""
    tree = source_tree(tmp_path)
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree,
                           env=child_env({"CFLAGS": flag, "ZODB_JSON_CODEC_REQUIRE_EXT": "1"}),
                           capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    pythons = " ".join(shlex.split(sysconfig.get_config_var("CFLAGS") or ""))
    compiles = [line for line in build.stdout.splitlines() if " -c " in line and "_cython.c" in line]
    assert len(compiles) == len(MODULES), build.stdout[-3000:]
    for line in compiles:
        assert " ".join(shlex.split(line)).find(f"{pythons} {flag}") > 0, line
    [encoder] = (tree / "src" / "zodb_json_codec").glob(f"_encode_cython{EXT_SUFFIX}")
    assert without not in encoder.read_bytes()
    usual = list((ROOT / "src" / "zodb_json_codec").glob(f"_encode_cython{EXT_SUFFIX}"))
    if usual and sys.platform.startswith("linux") and os.uname().machine == "x86_64":  # the usual build has it
        assert without in usual[0].read_bytes()
    env = child_env({"PYTHONPATH": str(tree / "src"), "ZODB_JSON_CODEC_PURE_PYTHON": "0"})
    where = subprocess.run([sys.executable, "-c", "import zodb_json_codec._encode_cython as e; print(e.__file__)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(encoder), where.stdout + where.stderr
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PORTABLE_TESTS],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert tests.returncode == 0, tests.stdout[-5000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout.splitlines()[-1]
