"""Declares the optional Cython twins; all metadata lives in pyproject.toml.

Every ``src/zodb_json_codec/*.pyx`` becomes an extension, built when it can
be.  What the environment asks for is read by ``src/zodb_json_codec/_switch.py``,
the function the package reads at import (loaded here by its path: building
never imports the package):

* nothing set: the Cython twins if a working C compiler and Cython are
  there; otherwise the Python twin alone, with one warning line saying how to get
  the Cython twins;
* ``ZODB_JSON_CODEC_PURE_PYTHON=0`` or ``ZODB_JSON_CODEC_REQUIRE_EXT=1``: the
  Cython twins are required, a build that cannot make them fails;
* ``ZODB_JSON_CODEC_PURE_PYTHON`` set to anything else, or PyPy: nothing is
  built.

A wheel holds freshly built extensions or none: every build first removes
what an earlier build left in ``build/`` (or in the source tree, for
``--inplace``), builds all three or keeps none, and a wheel without them is
tagged ``py3-none-any``, never with a platform.  (An editable install's
wheel, which only points at the source tree, keeps setuptools' tag.)
"""

import contextlib
import importlib.util
import os
import shlex
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.errors import OptionError


HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE / "src" / "zodb_json_codec"


def _load_switch():
    spec = importlib.util.spec_from_file_location("_zodb_json_codec_switch", PACKAGE_DIR / "_switch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SWITCH = _load_switch()
MODE = SWITCH.requested_mode()
REQUIRED = MODE == SWITCH.CYTHON

try:
    import Cython.Compiler.Main  # noqa: F401 - setuptools' build_ext is Cython's when this imports
except ImportError:
    HAVE_CYTHON = False
else:
    HAVE_CYTHON = True


#: gcc's default limits on how much inlining may grow a unit or a function
#: leave some of the Cython twins' small ``cdef inline`` steps (the decoder's
#: opcode handlers, the encoder's ``_scalar``, ``_str`` and ``_op``) as calls
#: inside their hot loops (the modules are large); these let it inline them.
#: docs/design.md, "Build flags", says what they buy and cost.
GCC_INLINING_FLAGS = ["--param=inline-unit-growth=200", "--param=large-function-growth=400"]
INLINED_EXTENSIONS = {"zodb_json_codec._decode_cython", "zodb_json_codec._encode_cython"}


class CythonTwinsUnavailable(RuntimeError):
    """The Cython twins are required (ZODB_JSON_CODEC_PURE_PYTHON=0 or ZODB_JSON_CODEC_REQUIRE_EXT=1) but cannot be built."""


def fall_back(reason):
    """One line on stderr (or an error when the Cython twins are required)."""
    if REQUIRED:
        raise CythonTwinsUnavailable(f"the Cython twins of zodb-json-codec are required, but {reason}")
    print(
        f"WARNING: zodb-json-codec: {reason}, so only its Python twin is installed (several times slower); "
        f"for the Cython twins, {SWITCH.HOW_TO_COMPILE}",
        file=sys.stderr,
    )


@contextlib.contextmanager
def _silenced():
    """Our output and that of the processes we start (the compiler) go to the null device."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no such descriptors: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


# With Cython, setuptools' build_ext is Cython's: it cythonizes inside build_extension.
class all_or_nothing_build_ext(build_ext):
    """Builds every extension afresh, or none: then the distribution has no extensions at all."""

    def run(self):
        for path in self._outputs():
            if os.path.exists(path):
                os.remove(path)  # an earlier build's module must not pass for this one's
        if self.extensions and not HAVE_CYTHON:
            self._give_up("Cython is not installed")
            return
        try:
            super().run()
        except CythonTwinsUnavailable:
            raise
        except Exception as exc:  # no compiler at all (e.g. no MSVC) fails before any extension
            self._give_up(f"its C extensions could not be built ({type(exc).__name__}: {exc})")

    def build_extensions(self):
        self._keep_pythons_cflags()
        try:
            self._check_compiler()
        except Exception:  # CompileError: a missing or broken compiler, or no Python.h (its output is above)
            compiler = (getattr(self.compiler, "compiler_so", None) or [type(self.compiler).__name__])[0]
            self._give_up(f"there is no working C compiler ({compiler!r} cannot compile a file that includes Python.h)")
            return
        flags = self._inlining_flags()
        for ext in self.extensions:
            if ext.name in INLINED_EXTENSIONS:
                ext.extra_compile_args = list(ext.extra_compile_args or []) + flags
        super().build_extensions()
        missing = [ext.name for ext in self.extensions if not os.path.exists(self.get_ext_fullpath(ext.name))]
        if missing:
            self._give_up(f"{', '.join(missing)} did not build")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # compiler, linker or Cython error: the others may still build
            if REQUIRED:
                raise
            print(f"building {ext.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _keep_pythons_cflags(self):
        """Python's own CFLAGS first, then CFLAGS from the environment, as distutils always did.

        Recent setuptools (84 here) lets the environment's CFLAGS replace Python's (-DNDEBUG -fwrapv -O2
        or -O3 ...) instead of adding to them: with CFLAGS=-g0, as the release workflow and
        scripts/build-wheels set it, the twins came out unoptimised (-O0) with CPython's asserts on."""
        if self.compiler.compiler_type != "unix" or not os.environ.get("CFLAGS"):
            return
        pythons = shlex.split(sysconfig.get_config_var("CFLAGS") or "")
        command = list(self.compiler.compiler_so)
        if not pythons or any(command[i:i + len(pythons)] == pythons for i in range(len(command))):
            return  # an older setuptools kept them
        cc = len(shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"))
        self.compiler.set_executable("compiler_so", command[:cc] + pythons + command[cc:])

    def _check_compiler(self):
        """Compile a file that includes Python.h: a quick, clear failure instead of one per extension."""
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "probe.c")
            with open(probe, "w") as f:
                f.write("#include <Python.h>\nint zjc_probe(void) { return 0; }\n")
            self.compiler.compile([probe], output_dir=tmp)

    def _inlining_flags(self):
        """GCC_INLINING_FLAGS if the compiler takes them without a warning (gcc does; clang and MSVC do not)."""
        if self.compiler.compiler_type != "unix":
            return []
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "inlining.c")
            with open(probe, "w") as f:
                f.write("int zjc_inlining_probe(void) { return 0; }\n")
            try:
                with _silenced():  # clang's "argument unused" error would read as a failed build
                    self.compiler.compile([probe], output_dir=tmp, extra_postargs=GCC_INLINING_FLAGS + ["-Werror"])
            except Exception:  # CompileError: these --param names are gcc's own
                return []
        return GCC_INLINING_FLAGS

    def _give_up(self, reason):
        fall_back(reason)
        for path in self._outputs():
            if os.path.exists(path):
                os.remove(path)
        self.extensions = []
        self.distribution.ext_modules = []

    def _outputs(self):
        """Where this build puts each extension, and where an in-place build copies it."""
        paths = []
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
            paths += [inplace_file, regular_file] if self.inplace else [regular_file]
        return paths


class wheel_tagged_by_contents(bdist_wheel):
    """A platform tag only for a wheel that holds the extensions this very build made."""

    def finalize_options(self):
        super().finalize_options()
        if self.skip_build and self.distribution.has_ext_modules():
            raise OptionError("--skip-build: this wheel could hold an earlier build's extensions; build it whole")

    def run_command(self, command):
        super().run_command(command)
        if command == "build":  # all_or_nothing_build_ext dropped the extensions if it could not build them
            self.root_is_pure = not self.distribution.has_ext_modules()


def extensions():
    if MODE == SWITCH.PYTHON:
        return []
    exts = []
    sources = sorted(PACKAGE_DIR.glob("*.pyx"))
    # The hand-written C the .pyx files include (a change to it rebuilds them).
    headers = [h.relative_to(HERE).as_posix() for h in sorted(PACKAGE_DIR.glob("*.h"))]
    for source in sources:
        ext = Extension(f"zodb_json_codec.{source.stem}", [source.relative_to(HERE).as_posix()], depends=headers)
        ext.cython_directives = {"language_level": "3"}
        exts.append(ext)
    return exts


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": all_or_nothing_build_ext, "bdist_wheel": wheel_tagged_by_contents},
)
