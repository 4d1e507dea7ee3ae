#!/usr/bin/env bash
# One harness under libFuzzer, with the instrumented build (made or brought up
# to date first by fuzz/build.sh) and the sanitizer runtime preloaded:
#
#   bash fuzz/run.sh fuzz_decode [libFuzzer arguments and corpus dirs or input files]
#
# e.g. bash fuzz/run.sh fuzz_decode crash-1234abcd      (reproduce one finding)
#      bash fuzz/run.sh fuzz_decode -runs=0 fuzz/corpus/fuzz_decode   (just run the seeds)
# scripts/fuzz is the usual way in (a time limit, scratch dirs, a summary).
#
# Environment: as fuzz/build.sh's, plus FUZZ_STACK_KB, FUZZ_SLOW_SECONDS and
# FUZZ_LOOSE_ERRORS (fuzz/fuzzlib.py); FUZZ_NO_BUILD=1 uses the last build as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
harness=${1:?usage: fuzz/run.sh HARNESS [libFuzzer arguments...]}
shift
harness=${harness%.py}
harness=${harness##*/}
[[ -f $here/$harness.py ]] || { echo "fuzz/run.sh: no harness $here/$harness.py" >&2; exit 2; }
if [[ -n ${FUZZ_NO_BUILD:-} ]]; then
  out=${FUZZ_BUILD_DIR:-$here/../.fuzz-build}
  out=$(cd "$out" && pwd)
else
  out=$(bash "$here/build.sh")
fi
venv=${FUZZ_VENV:-$out/venv}

# The runtime atheris ships: ASan, UBSan and libFuzzer in one shared library
# (fuzz/build.sh checked that it defines every symbol the extensions need).
export LD_PRELOAD=$(cat "$out/runtime")${LD_PRELOAD:+:$LD_PRELOAD}
# detect_leaks=0: CPython leaves much allocated at exit.  allocator_may_return_null:
# a refused allocation is a MemoryError the oracle reports, not an ASan abort.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:strict_string_checks=0:handle_abort=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:report_error_type=1}
# Every Python object in memory ASan watches (pymalloc's arenas would hide
# overflows and uses after free of objects).
export PYTHONMALLOC=malloc
export PYTHONPATH=$out/copy/src
export ZODB_JSON_CODEC_PURE_PYTHON=0
export FUZZ_COPY=$out/copy
# -fork/-jobs start the harness again as a command of its own: its #! line finds this python.
export PATH=$venv/bin:$PATH
exec "$venv/bin/python" "$here/$harness.py" "$@"
