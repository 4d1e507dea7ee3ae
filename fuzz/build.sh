#!/usr/bin/env bash
# Builds what the fuzz harnesses run: a venv with atheris and the test
# dependencies, and a copy of the project whose Cython twin is compiled by
# clang with libFuzzer's coverage (-fsanitize=fuzzer-no-link), AddressSanitizer
# and UndefinedBehaviorSanitizer (every UBSan report aborts).  fuzz/README.md
# says how it is run.
#
#   bash fuzz/build.sh        prints the build directory (default .fuzz-build/)
#
# Installs clang through apt when it is missing (as root, or through sudo).
# Cached: the copy is rebuilt only when a file of src/zodb_json_codec (or
# setup.py, pyproject.toml, these flags, clang, Cython or atheris) changed since
# the last build, so whatever the working tree holds now is what is fuzzed.
#
# Environment: FUZZ_BUILD_DIR (default .fuzz-build), FUZZ_PYTHON (the
# interpreter of the venv: default pyenv's newest 3.11, else python3),
# FUZZ_SOURCE (the tree whose setup.py, pyproject.toml and src/ are built:
# default this checkout; e.g. an export of an older commit, to reproduce),
# FUZZ_VENV (default FUZZ_BUILD_DIR/venv: builds of two trees may share one).
#
# The runtime: atheris' wheel ships asan_with_fuzzer.so (ASan + UBSan +
# libFuzzer in one shared library); the harnesses run with it LD_PRELOADed
# (fuzz/run.sh sets that up) so that the extension modules' sanitizer and
# coverage calls resolve to the one libFuzzer atheris drives.  The extension
# objects are not linked against any sanitizer runtime (clang links none into
# shared objects), so their undefined __asan_*, __ubsan_* and __sanitizer_cov_*
# symbols must all be defined by that library: this script checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${FUZZ_BUILD_DIR:-$root/.fuzz-build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/build.log

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
# apt, one script at a time (CI runs the fuzzers beside the suite): a lock of our own, and dpkg's waited for.
apt_get() { as_root flock /var/lock/zodb-json-codec-apt.lock apt-get -o DPkg::Lock::Timeout=900 "$@"; }
say() { echo "fuzz/build.sh: $*" >&2; }

# --- clang -----------------------------------------------------------------
CLANG=${CLANG:-clang}
# Can clang link a sanitized shared object? (clang 14 links a small static part
# of ASan, libclang_rt.asan_static, into each: Debian's libclang-rt-dev.)
links_sanitized() {
  local probe
  probe=$(mktemp -d)
  echo 'int f(int x) { return x + 1; }' >"$probe/p.c"
  "$CLANG" -shared -fPIC -fsanitize=fuzzer-no-link,address,undefined "$probe/p.c" -o "$probe/p.so" >>"$log" 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}
if ! command -v "$CLANG" >/dev/null || ! links_sanitized; then
  say "installing clang and its sanitizer runtime (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -q >>"$log" 2>&1
  # (the harnesses preload atheris' runtime; only the static part linked into each object comes from clang's)
  apt_get install -y -q --no-install-recommends clang libclang-rt-dev binutils >>"$log" 2>&1
fi
links_sanitized || { say "clang cannot link a sanitized shared object (see $log)"; exit 2; }
command -v "$CLANG" >/dev/null || { say "no clang after apt-get install clang"; exit 2; }

# --- the interpreter and the venv --------------------------------------------
if [[ -z ${FUZZ_PYTHON:-} ]]; then
  FUZZ_PYTHON=$(compgen -G "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.11.*/bin/python3" | sort -V | tail -n 1 || true)
  [[ -n $FUZZ_PYTHON ]] || FUZZ_PYTHON=$(python3 -c 'import sys; print(sys.executable)')
fi
venv=${FUZZ_VENV:-$out/venv}
py=$venv/bin/python
if [[ ! -x $py ]]; then
  if ! "$FUZZ_PYTHON" -c "import ensurepip, venv" 2>/dev/null; then
    apt_get update -q >>"$log" 2>&1
    apt_get install -y -q --no-install-recommends python3-venv python3-dev >>"$log" 2>&1
  fi
  say "making $venv from $FUZZ_PYTHON"
  "$FUZZ_PYTHON" -m venv "$venv"
fi

# --- the copy ---------------------------------------------------------------
# Sources only: earlier builds' .so/.c/.html and caches are left out.
copy=$out/copy
stage=$out/copy.new
rm -rf "$stage"
mkdir -p "$stage/src"
source_tree=$(cd "${FUZZ_SOURCE:-$root}" && pwd)
(cd "$source_tree" && cp setup.py pyproject.toml README.md LICENSE MANIFEST.in "$stage/")
(cd "$source_tree/src" && find . \( -name __pycache__ -o -name '*.egg-info' \) -prune -o -type f \
    ! -name '*.so' ! -name '*.c' ! -name '*.html' ! -name '*.py[co]' -print0 \
  | xargs -0 cp --parents -t "$stage/src")

# --- dependencies (keyed by pyproject.toml) ---------------------------------
deps_key=$( (cat pyproject.toml; "$py" -VV) | sha256sum | cut -c1-16)
if [[ $(cat "$out/deps.stamp" 2>/dev/null) != "$deps_key" ]]; then
  say "installing atheris, Cython and the test dependencies into $venv"
  # The package itself pure: the copy's src/ comes first on sys.path when the harnesses run.
  (cd "$stage" && ZODB_JSON_CODEC_PURE_PYTHON=1 nice -n 10 "$py" -m pip install -q --disable-pip-version-check \
      "atheris>=2.3" "Cython>=3.1,<4" setuptools wheel ".[test]") >>"$log" 2>&1 \
    || { say "pip install failed; see $log"; tail -20 "$log" >&2; exit 2; }
  rm -rf "$stage/build" "$stage"/src/*.egg-info
  echo "$deps_key" >"$out/deps.stamp"
fi

# --- flags, and the build key -----------------------------------------------
SAN=fuzzer-no-link,address,undefined
# -fno-wrapv: Python's own CFLAGS (sysconfig) carry -fwrapv, under which clang
# before 19 leaves signed overflow unchecked; the twin must not overflow either way.
# -fdebug-prefix-map: reports name the sources in the copy, not in the staging folder it was built in.
CFLAGS_FUZZ="-fsanitize=$SAN -fno-sanitize-recover=undefined -fno-wrapv -fno-omit-frame-pointer -g -O1 -fdebug-prefix-map=$stage=$copy"
LDFLAGS_FUZZ="-fsanitize=$SAN"
key=$( (cd "$stage" && find . -type f | LC_ALL=C sort | xargs sha256sum;
        echo "$CFLAGS_FUZZ $LDFLAGS_FUZZ"; "$CLANG" --version | head -1;
        "$py" -c "import Cython, importlib.metadata as m; print(Cython.__version__, m.version('atheris'))") \
      | sha256sum | cut -c1-16)
if [[ -d $copy && $(cat "$out/build.stamp" 2>/dev/null) == "$key" ]]; then
  rm -rf "$stage"
  echo "$out"
  exit 0
fi

say "building the Cython twin with $CLANG ($("$CLANG" --version | head -1)), key $key"
if ! (cd "$stage" && CC="$CLANG" CFLAGS="$CFLAGS_FUZZ" LDFLAGS="$LDFLAGS_FUZZ" \
      ZODB_JSON_CODEC_PURE_PYTHON=0 nice -n 10 "$py" setup.py build_ext --inplace) >>"$log" 2>&1; then
  say "the build failed; see $log"
  tail -30 "$log" >&2
  exit 2
fi
rm -rf "$stage/build"

# Every extension module must be instrumented, and every sanitizer/coverage
# symbol it needs must be defined by the runtime the harnesses preload.
runtime=$("$py" -c "import atheris, os; print(os.path.join(atheris.path(), 'asan_with_fuzzer.so'))")
[[ -f $runtime ]] || { say "atheris has no $runtime"; exit 2; }
shopt -s nullglob
modules=("$stage"/src/zodb_json_codec/*.so)
pyx=("$stage"/src/zodb_json_codec/*.pyx)
((${#modules[@]} == ${#pyx[@]})) || { say "built ${#modules[@]} modules for ${#pyx[@]} .pyx files"; exit 2; }
defined=$(nm -D --defined-only "$runtime" | awk '{print $3}' | sort -u)
for so in "${modules[@]}"; do
  needed=$(nm -D --undefined-only "$so" | awk '{print $2}' | grep -E '^__(asan|ubsan|sanitizer)_' | sort -u)
  grep -q '^__sanitizer_cov_8bit_counters_init$' <<<"$needed" || { say "$so: no libFuzzer counters"; exit 2; }
  grep -q '^__asan_' <<<"$needed" || { say "$so: not built with ASan"; exit 2; }
  grep -q '^__ubsan_handle_.*_abort$' <<<"$needed" || { say "$so: no aborting UBSan checks"; exit 2; }
  missing=$(comm -23 <(echo "$needed") <(echo "$defined"))
  [[ -z $missing ]] || { say "$so needs symbols $runtime lacks: $missing"; exit 2; }
done

rm -rf "$copy"
mv "$stage" "$copy"
echo "$runtime" >"$out/runtime"
echo "$key" >"$out/build.stamp"
say "built $copy"
echo "$out"
