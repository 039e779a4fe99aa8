#!/usr/bin/env bash
# Installs the comparison libraries for bench/compare/ (idempotent).
#
#   bash bench/setup_compare.sh [MAIN_VENV]      # MAIN_VENV defaults to .venv
#
# - SEAL:    `tenseal` (bundles SEAL 4.x as tenseal.sealapi) + `zstandard` (to
#            report uncompressed SEAL serialization sizes) into MAIN_VENV
#            (Python 3.11; created with `python3 -m venv` if missing).
# - OpenFHE: `.venv-openfhe`, a Python 3.10 venv (the `openfhe` wheel does not
#            import under 3.11), with `openfhe` + `numpy`.
# - SEAL + Intel HEXL: `.seal-hexl/`, SEAL 4.0 built from source with HEXL (AVX-512 / IFMA
#            kernels) and the C++ runner bench/compare/seal_hexl_runner.cpp. The sources are
#            those the crates.io package `seal_fhe` vendors (SEAL/thirdparty/hexl included;
#            fetched with `cargo fetch`), HEXL's cpu_features comes from Debian's
#            `libcpu-features-dev` (`apt-get download`, unpacked with `dpkg -x`: nothing is
#            installed system-wide); needs cmake, g++ and dpkg. About a minute here.
# - SPU:     `.venv-spu`, a Python 3.11 venv (`python3 -m venv`) with SecretFlow
#            `spu` (cp311 manylinux wheel), jax/jaxlib (spu needs jax <= 0.4.34),
#            numpy < 2 and `onnx` (to read network D's weights).
# A failed install prints a note and the script still exits 0: the benchmark
# then skips that library.
#
# Versions verified on this machine (Debian, x86-64, 2 cores):
TENSEAL_VERSION=0.3.18          # SEAL 4.x inside (the runner reports the exact one)
ZSTANDARD_VERSION=0.25.0
OPENFHE_VERSION=1.6.1.0.22.4    # openfhe-python 1.6.1.0, manylinux wheel for cp310
OPENFHE_NUMPY_VERSION=2.2.6
SPU_VERSION=0.9.5               # SecretFlow SPU, Cheetah protocol (cp311 wheel)
SPU_JAX_VERSION=0.4.34          # jax and jaxlib; spu 0.9.5 requires jax <= 0.4.34
SPU_NUMPY_VERSION=1.26.4        # spu 0.9.5 requires numpy < 2
SPU_ONNX_VERSION=1.17.0
SEAL_FHE_VERSION=0.8.1          # crates.io; vendors SEAL 4.0.0 and Intel HEXL
CPU_FEATURES_DEB=libcpu-features-dev   # Debian 13: google cpu_features 0.7.0 (HEXL's CPU checks)
set -u

cd "$(dirname "$0")/.." || exit 0
MAIN_VENV="${1:-.venv}"
OFHE_VENV=".venv-openfhe"
PIP_FLAGS=(--quiet --disable-pip-version-check)
status=()

note() { echo "setup_compare: $*" >&2; }

# ---------------------------------------------------------------- SEAL
seal_ok() {
  "$MAIN_VENV/bin/python" - <<EOF 2>/dev/null
import importlib.metadata as m, sys
import tenseal.sealapi, zstandard, numpy
sys.exit(0 if m.version("tenseal") == "$TENSEAL_VERSION" else 1)
EOF
}

if [ ! -x "$MAIN_VENV/bin/python" ]; then
  note "creating $MAIN_VENV with $(command -v python3)"
  python3 -m venv "$MAIN_VENV" || note "could not create $MAIN_VENV"
fi
if [ -x "$MAIN_VENV/bin/python" ]; then
  if seal_ok; then
    status+=("seal: already installed (tenseal $TENSEAL_VERSION)")
  else
    # numpy left unpinned here: the main venv belongs to the project.
    if "$MAIN_VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" \
         "tenseal==$TENSEAL_VERSION" "zstandard==$ZSTANDARD_VERSION" numpy && seal_ok; then
      status+=("seal: installed tenseal $TENSEAL_VERSION into $MAIN_VENV")
    else
      status+=("seal: NOT available (tenseal install/import failed) - the benchmark skips SEAL")
    fi
  fi
else
  status+=("seal: NOT available (no venv at $MAIN_VENV) - the benchmark skips SEAL")
fi

# ---------------------------------------------------------------- OpenFHE
is_py310() { "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 10) else 1)' >/dev/null 2>&1; }

find_py310() {
  # Real interpreters first: a pyenv shim for python3.10 exists even when the
  # active pyenv version is not 3.10 (and then it fails to run).
  local c v
  for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V -r) \
           /usr/bin/python3.10 /usr/local/bin/python3.10 "$(command -v python3.10 2>/dev/null)"; do
    [ -n "$c" ] && [ -x "$c" ] && is_py310 "$c" && { echo "$c"; return 0; }
  done
  if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep '^3\.10\.' | sort -V -r); do
      c="$(pyenv root)/versions/$v/bin/python3.10"
      [ -x "$c" ] && is_py310 "$c" && { echo "$c"; return 0; }
    done
  fi
  return 1
}

ofhe_ok() {
  OMP_NUM_THREADS=1 "$OFHE_VENV/bin/python" - <<EOF 2>/dev/null
import importlib.metadata as m, sys
import openfhe, numpy
sys.exit(0 if m.version("openfhe") == "$OPENFHE_VERSION" else 1)
EOF
}

if [ -x "$OFHE_VENV/bin/python" ] && ofhe_ok; then
  status+=("openfhe: already installed (openfhe $OPENFHE_VERSION in $OFHE_VENV)")
else
  PY310="$(find_py310)"
  if [ -z "$PY310" ]; then
    status+=("openfhe: NOT available (no Python 3.10 found: install it, e.g. via pyenv) - the benchmark skips OpenFHE")
  else
    if [ ! -x "$OFHE_VENV/bin/python" ]; then
      note "creating $OFHE_VENV with $PY310"
      "$PY310" -m venv "$OFHE_VENV" || note "could not create $OFHE_VENV"
    fi
    if [ -x "$OFHE_VENV/bin/python" ] && \
       "$OFHE_VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" \
         "openfhe==$OPENFHE_VERSION" "numpy==$OPENFHE_NUMPY_VERSION" && ofhe_ok; then
      status+=("openfhe: installed openfhe $OPENFHE_VERSION into $OFHE_VENV ($PY310)")
    else
      status+=("openfhe: NOT available (openfhe install/import failed) - the benchmark skips OpenFHE")
    fi
  fi
fi

# ---------------------------------------------------------------- SEAL + Intel HEXL
HEXL_DIR=".seal-hexl"
RUNNER_SRC="bench/compare/seal_hexl_runner.cpp"
hexl_stamp() { echo "seal_fhe $SEAL_FHE_VERSION $(sha256sum "$RUNNER_SRC" | cut -c1-16)"; }

build_seal_hexl() {
  local fetch="$HEXL_DIR/fetch" crate src build cpuf
  mkdir -p "$fetch/src" "$HEXL_DIR/bin" || return 1
  printf '[package]\nname = "fetch-seal-fhe"\nversion = "0.0.0"\nedition = "2021"\n\n[workspace]\n\n[dependencies]\nseal_fhe = "=%s"\n' \
    "$SEAL_FHE_VERSION" > "$fetch/Cargo.toml"
  : > "$fetch/src/lib.rs"
  cargo fetch --quiet --manifest-path "$fetch/Cargo.toml" || return 1
  crate="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/seal_fhe-"$SEAL_FHE_VERSION".crate 2>/dev/null | head -1)"
  [ -n "$crate" ] || { note "seal_fhe $SEAL_FHE_VERSION not in cargo's cache"; return 1; }
  rm -rf "$HEXL_DIR/src" && mkdir -p "$HEXL_DIR/src" && tar -xzf "$crate" -C "$HEXL_DIR/src" || return 1
  src="$(pwd)/$HEXL_DIR/src/seal_fhe-$SEAL_FHE_VERSION/SEAL"
  [ -f "$src/thirdparty/hexl/CMakeLists.txt" ] || { note "no HEXL sources in seal_fhe $SEAL_FHE_VERSION"; return 1; }
  cpuf="$(pwd)/$HEXL_DIR/cpu_features"
  rm -rf "$cpuf" "$HEXL_DIR/deb" && mkdir -p "$HEXL_DIR/deb" || return 1
  (cd "$HEXL_DIR/deb" && apt-get download "$CPU_FEATURES_DEB" >/dev/null 2>&1) || { note "apt-get download $CPU_FEATURES_DEB failed"; return 1; }
  dpkg -x "$HEXL_DIR"/deb/*.deb "$cpuf" || return 1
  build="$(pwd)/$HEXL_DIR/build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSEAL_USE_INTEL_HEXL=ON -DSEAL_BUILD_DEPS=ON \
    -DSEAL_USE_ZLIB=OFF -DSEAL_USE_ZSTD=OFF -DSEAL_USE_MSGSL=OFF -DSEAL_BUILD_TESTS=OFF \
    -DSEAL_BUILD_EXAMPLES=OFF -DSEAL_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH="$cpuf/usr" \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON >"$HEXL_DIR/build.log" 2>&1 \
    || { note "cmake configure failed: see $HEXL_DIR/build.log"; return 1; }
  # HEXL's sources warn a lot under gcc 12: the output goes to the log
  cmake --build "$build" -j"$(nproc)" >>"$HEXL_DIR/build.log" 2>&1 \
    || { note "the SEAL + HEXL build failed: see $HEXL_DIR/build.log"; return 1; }
  g++ -O2 -std=c++17 -I"$src/native/src" -I"$build/native/src" -I"$src/thirdparty/hexl/hexl/include" \
    -o "$HEXL_DIR/bin/seal_hexl_runner" "$RUNNER_SRC" "$build/lib/libseal-4.0.a" \
    "$build/thirdparty/hexl/hexl/lib/libhexl.a" "$cpuf"/usr/lib/*/libcpu_features.a -lpthread || return 1
  hexl_stamp > "$HEXL_DIR/STAMP"
}

if [ -x "$HEXL_DIR/bin/seal_hexl_runner" ] && [ "$(cat "$HEXL_DIR/STAMP" 2>/dev/null)" = "$(hexl_stamp)" ]; then
  status+=("seal-hexl: already built (SEAL 4.0.0 + HEXL from seal_fhe $SEAL_FHE_VERSION in $HEXL_DIR)")
elif ! command -v cmake >/dev/null || ! command -v g++ >/dev/null || ! command -v dpkg >/dev/null; then
  status+=("seal-hexl: NOT built (needs cmake, g++ and dpkg) - the benchmark skips SEAL + HEXL")
else
  note "building SEAL 4.0.0 with Intel HEXL into $HEXL_DIR (a few minutes)"
  if build_seal_hexl; then
    status+=("seal-hexl: built SEAL 4.0.0 + HEXL from seal_fhe $SEAL_FHE_VERSION into $HEXL_DIR")
  else
    status+=("seal-hexl: NOT built (see the notes above) - the benchmark skips SEAL + HEXL")
  fi
fi

# ---------------------------------------------------------------- SPU
SPU_VENV=".venv-spu"
is_py311() { "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' >/dev/null 2>&1; }

spu_ok() {
  "$SPU_VENV/bin/python" - <<EOF 2>/dev/null
import importlib.metadata as m, sys
import spu, jax, numpy, onnx
sys.exit(0 if m.version("spu") == "$SPU_VERSION" and jax.__version__ == "$SPU_JAX_VERSION" else 1)
EOF
}

if [ -x "$SPU_VENV/bin/python" ] && spu_ok; then
  status+=("spu: already installed (spu $SPU_VERSION in $SPU_VENV)")
else
  PY311="$(command -v python3)"
  if [ -z "$PY311" ] || ! is_py311 "$PY311"; then
    PY311="$(command -v python3.11 2>/dev/null)"
  fi
  if [ -z "$PY311" ] || ! is_py311 "$PY311"; then
    status+=("spu: NOT available (no Python 3.11 found; the spu wheel is cp311) - the benchmark skips SPU")
  else
    if [ ! -x "$SPU_VENV/bin/python" ]; then
      note "creating $SPU_VENV with $PY311"
      "$PY311" -m venv "$SPU_VENV" || note "could not create $SPU_VENV"
    fi
    if [ -x "$SPU_VENV/bin/python" ] && \
       "$SPU_VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" \
         "spu==$SPU_VERSION" "jax[cpu]==$SPU_JAX_VERSION" "jaxlib==$SPU_JAX_VERSION" \
         "numpy==$SPU_NUMPY_VERSION" "onnx==$SPU_ONNX_VERSION" && spu_ok; then
      status+=("spu: installed spu $SPU_VERSION into $SPU_VENV ($PY311)")
    else
      status+=("spu: NOT available (spu install/import failed) - the benchmark skips SPU")
    fi
  fi
fi

for s in "${status[@]}"; do echo "setup_compare: $s"; done
exit 0
