# heinfer — every set-up step from a fresh machine (python3 3.11, cargo, gcc; PyPI and
# crates.io reachable). `make test` and `make demo` are the two commands; see README.
#
# The native module is built once into the venv (maturin develop, release profile) and
# rebuilt only when a Rust source, a Cargo manifest or pyproject.toml changes (stamp files).

PYTHON3 ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMPS  := $(VENV)/.heinfer-stamps

MATURIN_VERSION := 1.16.0
TEST_DEPS := "numpy>=1.24,<3" "pytest>=8,<10" "hypothesis>=6.100,<7" "scipy>=1.11,<2" "onnx>=1.16,<2" "onnxruntime>=1.18,<2" \
             "grpcio>=1.85.1,<2" "click>=8.1,<9" "rich>=13,<16" "protobuf>=7.35.1,<8" \
             "grpcio-tools==1.85.1" "import-linter>=2.1,<3" "ray==2.60.0"

RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml Cargo.lock

# Cargo and maturin must agree on the interpreter, or pyo3 rebuilds at every switch.
export PYO3_PYTHON := $(abspath $(PY))

.PHONY: proto all venv native test test-rust test-python test-fast test-torch demo bench bench-quick bench-throughput bench-latency bench-kernels bench-service bench-scaleout bench-deps models clean

all: native

$(STAMPS)/venv:
	$(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "maturin==$(MATURIN_VERSION)" $(TEST_DEPS)
	mkdir -p $(STAMPS) && touch $@

venv: $(STAMPS)/venv

$(STAMPS)/native: $(STAMPS)/venv $(RUST_SOURCES) pyproject.toml
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet
	touch $@

native: $(STAMPS)/native

# After the native build: maturin compiles heinfer-py with its own crate-type flags, so
# running cargo test second leaves both builds fresh for the next `make test`.
# `cargo check --benches`: the criterion benchmarks are not built by `cargo test`, and a bench
# that no longer compiles went unnoticed once (kernels' linear bench after an API change).
# `cargo doc` with warnings as errors: a doc comment's link that no longer resolves (an item
# moved or renamed) fails the build instead of rendering as plain text.
test-rust: $(STAMPS)/native
	cargo test --workspace --release
	cargo check --workspace --benches --quiet
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# The PyTorch front end with both of torch's ONNX exporters (tests/python/test_torch.py, which
# `make test` skips while torch is absent). Installs torch and onnxscript into the venv: about
# 7 GB, since PyPI's torch wheels carry their CUDA libraries. Versions as tested.
TORCH_DEPS := "torch==2.9.1" "onnxscript==0.7.2"
test-torch: $(STAMPS)/native
	$(PY) -m pip install --quiet --disable-pip-version-check $(TORCH_DEPS)
	$(PY) -m pytest tests/python/test_torch.py tests/python/compiler/test_onnx_import.py -q

# Every Python test, the @slow ones included (they fit CI's time: the one there takes ~6 s).
test-python: $(STAMPS)/native
	$(PY) -m pytest tests/python -q --run-slow

test: test-rust test-python

# The Python tests without the @slow ones, for a quick round while editing.
test-fast: $(STAMPS)/native
	$(PY) -m pytest tests/python -q

demo: $(STAMPS)/native
	$(PY) examples/demo.py

bench-deps: $(STAMPS)/venv
	bash bench/setup_compare.sh $(VENV)

bench: $(STAMPS)/native
	$(PY) bench/primitives.py

bench-quick: $(STAMPS)/native
	$(PY) bench/primitives.py --quick

bench-throughput: $(STAMPS)/native
	$(PY) bench/throughput.py

bench-latency: $(STAMPS)/native
	$(PY) bench/latency.py

bench-kernels: $(STAMPS)/native
	$(PY) bench/kernels.py

bench-service: $(STAMPS)/native
	$(PY) bench/service.py

# Ray scale-out (1 and 2 local workers on 127.0.0.1, projection to 8/64/512 nodes, a plot).
bench-scaleout: $(STAMPS)/native
	$(PY) -m pip install --quiet --disable-pip-version-check "matplotlib==3.11.2"
	$(PY) bench/scaleout.py

# Regenerates the checked-in protobuf code (python/heinfer/v1) from proto/ (grpcio-tools, pinned).
proto: $(STAMPS)/venv
	$(PY) -m grpc_tools.protoc -Iproto --python_out=python --pyi_out=python proto/heinfer/v1/*.proto

# Regenerates models/*.onnx and models/digits_test.npz (deterministic; scikit-learn's bundled digits).
models: $(STAMPS)/venv
	$(PY) -m pip install --quiet --disable-pip-version-check "scikit-learn>=1.4,<2"
	$(PY) models/train.py

clean:
	cargo clean
	rm -rf $(STAMPS) python/heinfer/_native*.so .pytest_cache .hypothesis
	find python tests -name __pycache__ -type d -prune -exec rm -rf {} +
