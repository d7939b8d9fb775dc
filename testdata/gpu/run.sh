#!/bin/bash
# testdata/gpu/run.sh — the CUDA pack on an NVIDIA GPU machine (issue 11), in stages:
#
#   stash    keep the first part of the mlx-cuda-13 wheel (and the binaries) in $W
#   install  reassemble the wheel; pip-install it, mlx and mlx-lm into $W/site with the
#            machine's own nvidia/ pip tree linked beside; assemble the cuda13 pack from the
#            same wheel with mkpack (so mlxgo and mlx-lm run the same libmlx.so)
#   verify   mlxgo verify-native on the GPU
#   l1       the L1 suite's tiny models: mlx-lm's logits on the GPU (logits.py --suite),
#            then mlxgo's TestL1 against them (models.test), MLX_ENABLE_TF32=0 in both
#            (L1_ORACLE_FLAGS=--no-checks skips the oracle's rerun and no-compile runs;
#            L1_SHARDS=N runs N oracle processes at once)
#   l1cases  only the L1 cases L1_CASES names ("model:prompt_len ..."), models carried in .gpu/p1/models or .gpu/p2/oracle
#   big1b    only make the Llama-3.2-1B-shaped models (bench1b makes them too)
#   bench1b  mlxgo generate vs mlx-lm, alternating (bench.py), Llama-3.2-1B shape bf16 + q4g64
#            (BENCH1B_SHAPES, BENCH1B_ROUNDS: default both shapes, 3 rounds)
#   bench8b  the same for the Llama-3.1-8B shape
#   benchserve mlxgo serve --batch N against mlx_lm.server --decode-concurrency N (its
#            BatchGenerator), N concurrent 512-token streams (server/testdata/bench_serve.py):
#            SERVE_SHAPES (default "llama1b-bf16:16 llama1b-bf16:64 llama8b-bf16:16"); each
#            server's stderr in out/serve-logs-* (MLXGO_TRACE_STEPS=1: a line per step)
#   ttft     serve's time to first token at concurrency 1, with and without mlxgo's prompt cache
#   hostcost the host's share of a decode step on the 1B shape (models.test benchmarks):
#            building one step's graph, and decode with and without pipelining; the
#            same three loops for mlx-lm (hostcost_mlxlm.py)
#   genhost  where gen adds to a decode step on the 1B shape (gen.test BenchmarkGenerateHost:
#            the bare pipelined loop, plus log-softmax, and gen.Generate; GENHOST_ROUNDS rounds
#            at each of GENHOST_PROMPTS' prompt lengths), a Go CPU profile of Generate (512-token
#            prompt), and the CLI's generate with
#            a line per step (MLXGO_TRACE_STEPS=1)
#   ctxcost  B=1 decode loops against the context's length on CTX_SHAPE (default the 4-bit 1B):
#            mlxgo's bare pipelined loop and gen.Generate (gen.test GenerateHost) and mlx-lm's
#            pipelined loop (hostcost_mlxlm.py), alternating, CTX_ROUNDS rounds at each of
#            CTX_PROMPTS' prompt lengths (default 32 512); then the CLI's generate on a
#            512-token prompt with a line per step (MLXGO_TRACE_STEPS=1)
#   steps    how evenly B=1 decode steps run (CTX_SHAPE, 512-token prompt, 256 tokens): each
#            step's time from mlxgo generate (MLXGO_TRACE_STEPS=1) and from mlx-lm's
#            bench_ref.py (MLXGO_BENCH_STEP_TIMES), STEPS_ROUNDS alternating rounds; median,
#            90th percentile and the share of steps over 1.25x the median
#   graphs   the CUDA graphs MLX commits in a decode step (MLX_SAVE_CUDA_GRAPHS_DOT_FILE), mlxgo's
#            sync loop against mlx-lm's (hostcost's loops) on GRAPHS_SHAPE (default the 4-bit
#            1B): graphs and nodes a step, kernels side by side (graphs.py)
#   moeprobe a mixture of experts' weight layout through MLX's sorted gather_mm / gather_qmm (a
#            view of gate_up_proj against a contiguous copy), mlx-lm's tiny MoE models loaded each
#            way, on the GPU and on the CPU, and quantized matmuls on a NaN-filled buffer cache
#            (moe_probe.py; the models from .gpu/p2/oracle/models)
#   summary  one table from the bench JSON
#
# Run from the repo root: testdata/gpu/run.sh STAGE... ; `make gpu-check` prepares what
# travels (.gpu/, git-ignored through .git/info/exclude) and prints the device commands.
# Everything it prints goes to $OUT too; state lives in $W while the machine stays warm.
# DEADLINE (seconds since this script started) skips stages that would start too late.
set -u
RET=${OUT:-/tmp/mlxgo-gpu-out} # what comes back: at most 8 files, so logs are tarred into it
W=${W:-/tmp/mlxgo-gpu}
OUT=$W/out
PY=${PY:-python3}
NVIDIA=${NVIDIA:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
DEADLINE=${DEADLINE:-100000}
PACK=$W/native/pack/linux-amd64-cuda13
REPO=$PWD
mkdir -p "$RET" "$OUT" "$W/results"
export MLX_ENABLE_TF32=0 PYTHONUNBUFFERED=1 PYTHONPATH=$W/site MLXGO_ORACLE_DIR=$W/oracle
# The same headers for both sides of L1 (see stage_install).
[ -d /usr/local/cuda/include ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
log() { echo "== $(date -u +%FT%TZ) +${SECONDS}s $*" | tee -a "$OUT/summary.txt"; }
keep() { cp -f "$@" "$W/results/" 2>/dev/null; }

stage_stash() {
	cp .gpu/p1/wheel.part-* "$W/" && ls -la "$W"
	# Tiny models for l1cases/moeprobe that did not fit beside the second call's 57 MB
	# (cp -r .cache/oracle/models/NAME .gpu/p1/models/): kept where the oracle looks.
	carried_models
	nvidia-smi; cat /proc/driver/nvidia/version; ldconfig -p | grep -E 'libcuda\.|libnvrtc|libcublas' ; ls "$NVIDIA" "$NVIDIA"/cu13/lib "$NVIDIA"/cu13/include | head -80
	"$PY" -c 'import transformers, numpy; print("transformers", transformers.__version__, "numpy", numpy.__version__)'
	"$PY" -m pip --version
}

stage_install() {
	# The binaries travel with the second part: the first (48 MiB of wheel) and the tree
	# (7 MiB) leave no room under the 64 MiB a call carries.
	tar -xJf .gpu/p2/bin.tar.xz -C "$W" || return 1
	cat "$W"/wheel.part-* .gpu/p2/wheel.part-* > "$W/mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl" || return 1
	(cd "$W" && sha256sum -c "$REPO/.gpu/p2/wheel.sha256") || return 1
	"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" \
		"$W"/mlx_cuda_13-*.whl .gpu/p2/whl/*.whl || return 1
	# mlx-lm's libmlx.so finds NVIDIA's libraries through its RPATH
	# ($ORIGIN/../../nvidia/*/lib), so the machine's pip tree goes beside it, but
	# without cu13/include: MLX's JIT takes <site>/nvidia/cu13/include before
	# CUDA_HOME, and the torch image's copy lacks crt/mma.h (the 2026-12-01 run's
	# qmm_sm90 kernels failed to compile on it). The toolkit's headers
	# (/usr/local/cuda, what mlxgo's CUDA_HOME picks there too) are complete.
	rm -rf "$W/site/nvidia" && mkdir -p "$W/site/nvidia/cu13"
	for d in "$NVIDIA"/*; do [ "$(basename "$d")" = cu13 ] || ln -sfn "$d" "$W/site/nvidia/"; done
	ln -sfn "$NVIDIA/cu13/lib" "$W/site/nvidia/cu13/lib"
	rm -rf "$W/wheel" && "$PY" -m zipfile -e "$W"/mlx_cuda_13-*.whl "$W/wheel" || return 1
	"$W/bin/mkpack" build -variant linux-amd64-cuda13 -wheel "$W/wheel" -shim "$W/bin/libmlxgo.so" -out "$W/native" || return 1
	cmp "$W/site/mlx/lib/libmlx.so" "$PACK/mlx/lib/libmlx.so" && echo "same libmlx.so in the pack and in mlx-lm's site"
	"$PY" -c 'import mlx.core as mx, mlx_lm; print("mlx", mx.__version__, "default", mx.default_device(), "cuda", mx.cuda.is_available())'
	nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
}

stage_verify() {
	MLXGO_NATIVE_DIR=$PACK "$W/bin/mlxgo" verify-native > "$OUT/verify-native.txt" 2>&1
	local rc=$?
	MLXGO_NATIVE_DIR=$PACK "$W/bin/mlxgo" verify-native --json > "$OUT/verify-native.json" 2>/dev/null
	cat "$OUT/verify-native.txt"; keep "$OUT/verify-native.txt" "$OUT/verify-native.json"
	return $rc
}

stage_l1() {
	export MLXGO_ORACLE_DEVICE=gpu
	# L1_ORACLE_TIMEOUT (seconds) bounds the oracle: MLX's CUDA JIT compiles every kernel
	# on a fresh machine, and the whole suite (with its rerun and no-compile checks) takes
	# longer than one device call; the cases made by then are compared, and said to be partial.
	# A second l1 call on the warm machine goes on from where the first one's oracle stopped.
	# L1_SHARDS=N runs the oracle as N processes at once (logits.py --shard): MLX compiles
	# each kernel with NVRTC on one CPU core, and the machine has 16. Each shard keeps its
	# own PTX cache (MLX writes cache files in place, so two processes compiling the same
	# kernel could read each other's half-written file); they are merged for TestL1 after.
	{ [ -d "$MLXGO_ORACLE_DIR/models" ] || "$PY" models/testdata/oracle/make_tiny.py; } >> "$OUT/l1-oracle.txt" 2>&1 || return 1
	local rc i n=${L1_SHARDS:-1} idx=$MLXGO_ORACLE_DIR/cases
	if [ "$n" -gt 1 ]; then
		mkdir -p "$W/ptx/merged"
		for i in $(seq 0 $((n - 1))); do
			mkdir -p "$W/ptx/shard-$i" && cp -rn "$W/ptx/merged/." "$W/ptx/shard-$i/"
			MLX_PTX_CACHE_DIR=$W/ptx/shard-$i timeout "${L1_ORACLE_TIMEOUT:-100000}" "$PY" models/testdata/oracle/logits.py \
				--suite --resume --shard "$i/$n" ${L1_ORACLE_FLAGS:-} >> "$OUT/l1-oracle-$i.txt" 2>&1 &
		done
		wait
		for i in $(seq 0 $((n - 1))); do cp -rn "$W/ptx/shard-$i/." "$W/ptx/merged/"; tail -2 "$OUT/l1-oracle-$i.txt"; done
		export MLX_PTX_CACHE_DIR=$W/ptx/merged
		"$PY" models/testdata/oracle/logits.py --merge-shards "$n" >> "$OUT/l1-oracle.txt" 2>&1
		rc=$?
		tail -1 "$OUT/l1-oracle.txt"
		[ $rc = 3 ] && echo "l1: PARTIAL: a shard ran out of time; comparing the cases made" | tee -a "$OUT/summary.txt"
		[ $rc = 3 ] || [ $rc = 0 ] || return $rc
	else
		timeout "${L1_ORACLE_TIMEOUT:-100000}" "$PY" models/testdata/oracle/logits.py --suite --resume ${L1_ORACLE_FLAGS:-} >> "$OUT/l1-oracle.txt" 2>&1
		rc=$?
		tail -5 "$OUT/l1-oracle.txt"
		if [ $rc = 124 ] && [ -f "$idx/index.partial.json" ]; then
			cp "$idx/index.partial.json" "$idx/index.json"
			echo "l1: PARTIAL: the oracle ran out of time; comparing the $(grep -o '"file"' "$idx/index.json" | wc -l) cases it made" | tee -a "$OUT/summary.txt"
		elif [ $rc != 0 ]; then
			return $rc
		fi
	fi
	(cd models && MLXGO_NATIVE_DIR=$PACK "$W/bin/models.test" -test.run '^TestL1$' -test.v -test.count=1) > "$OUT/l1.txt" 2>&1
	rc=$?
	grep -E '^(---|===|ok|FAIL|PASS)|max abs|differ' "$OUT/l1.txt" | grep -v '=== RUN' | tail -60
	keep "$OUT/l1.txt" "$OUT/l1-oracle"*.txt
	return $rc
}

# The tiny models carried in this call (.gpu/p1/models with the first part, .gpu/p2/oracle/models
# with the second), into the oracle's models directory, which stays while the machine is warm.
carried_models() {
	local d
	mkdir -p "$MLXGO_ORACLE_DIR/models"
	for d in .gpu/p1/models .gpu/p2/oracle/models; do
		[ -d "$d" ] && cp -r "$d/." "$MLXGO_ORACLE_DIR/models/"
	done
	true
}

stage_l1cases() {
	# A few L1 cases only (L1_CASES, each "model:prompt_len"), their tiny models carried in
	# .gpu/p1/models (see stash) or .gpu/p2/oracle/models: for a device budget too short for the suite.
	# L1_ORACLE_FLAGS (default --no-checks; empty: the oracle's rerun and no-compile checks too).
	export MLXGO_ORACLE_DEVICE=gpu
	local c m n
	carried_models
	for c in ${L1_CASES:-}; do
		m=${c%%:*} n=${c##*:}
		timeout "${L1_CASE_TIMEOUT:-150}" "$PY" models/testdata/oracle/logits.py --model "$MLXGO_ORACLE_DIR/models/$m" \
			--case "$m" --prompt-len "$n" ${L1_ORACLE_FLAGS---no-checks} >> "$OUT/l1-oracle.txt" 2>&1
		echo "oracle $m: rc=$?"
	done
	(cd models && MLXGO_NATIVE_DIR=$PACK "$W/bin/models.test" -test.run '^TestL1$' -test.v -test.count=1) > "$OUT/l1.txt" 2>&1
	local rc=$?
	grep -E '^(    ---|---|ok|FAIL)|l1_test' "$OUT/l1.txt" | tail -20
	keep "$OUT/l1.txt" "$OUT/l1-oracle.txt"
	return $rc
}

bench_one() { # model-dir rounds
	export MLXGO_NATIVE_DIR=$PACK
	local m=$1 rounds=$2 name
	name=$(basename "$m")
	MLXGO_ORACLE_DEVICE=gpu "$PY" models/testdata/oracle/bench.py --model "$m" --rounds "$rounds" \
		--prompt-tokens 512 --max-tokens 128 --json "$OUT/bench-$name.json" \
		--b-cmd "$W/bin/mlxgo generate -m {model} --raw --temp 0 --ignore-eos --max-tokens {max_tokens} --json-stats < {prompt_file}" \
		> "$OUT/bench-$name.txt" 2>&1
	local rc=$?
	grep '^bench:' "$OUT/bench-$name.txt"
	keep "$OUT/bench-$name.json" "$OUT/bench-$name.txt"
	return $rc
}

stage_big1b() {
	[ -d "$W/big/llama1b-q4g64" ] || "$PY" testdata/gpu/make_big.py --out "$W/big" --tokenizer "$W/tok/llama3_1" 1b
}

stage_bench1b() {
	stage_big1b || return 1
	local m
	for m in ${BENCH1B_SHAPES:-llama1b-bf16 llama1b-q4g64}; do bench_one "$W/big/$m" "${BENCH1B_ROUNDS:-3}"; done
}

stage_bench8b() {
	"$PY" testdata/gpu/make_big.py --out "$W/big" --tokenizer "$W/tok/llama3_1" 8b || return 1
	bench_one "$W/big/llama8b-bf16" 2; bench_one "$W/big/llama8b-q4g64" 2
}

stage_benchserve() {
	export MLXGO_NATIVE_DIR=$PACK
	local sb m b
	for sb in ${SERVE_SHAPES:-llama1b-bf16:16 llama1b-bf16:64 llama8b-bf16:16}; do
		m=${sb%%:*} b=${sb##*:}
		[ -d "$W/big/$m" ] || { log "benchserve: $m not made (run bench1b/bench8b first)"; continue; }
		"$PY" server/testdata/bench_serve.py --model "$W/big/$m" --mlxgo "$W/bin/mlxgo" --rounds 1 \
			--max-tokens 128 --prompt-tokens 512 --batch "$b" --concurrency "$b" \
			--json "$OUT/serve-$m-b$b.json" --server-logs "$OUT/serve-logs-$m-b$b" > "$OUT/serve-$m-b$b.txt" 2>&1
		echo "serve $m --batch $b: rc=$?"
		grep -E '^  (mlxgo|mlx_lm|generate):' "$OUT/serve-$m-b$b.txt"
		keep "$OUT/serve-$m-b$b.json" "$OUT/serve-$m-b$b.txt"
	done
}

stage_ttft() {
	# serve's time to first token at concurrency 1 (TTFT_SHAPE, default the 4-bit 1B), 3
	# alternating rounds, with mlxgo's prompt cache (a 3-token hit: bench_serve numbers every
	# prompt) and without it (--prompt-cache-bytes 0), a line per batch step in the logs.
	export MLXGO_NATIVE_DIR=$PACK MLXGO_TRACE_STEPS=1
	local m=${TTFT_SHAPE:-llama1b-q4g64} tag flags
	[ -d "$W/big/$m" ] || { log "ttft: $m not made (run big1b first)"; return 1; }
	for tag in cache nocache; do
		flags=""; [ $tag = nocache ] && flags="--prompt-cache-bytes 0"
		"$PY" server/testdata/bench_serve.py --model "$W/big/$m" --mlxgo "$W/bin/mlxgo" --rounds 3 \
			--max-tokens 32 --prompt-tokens 512 --batch 16 --concurrency 1 --mlxgo-flags "$flags" \
			--json "$OUT/ttft-$m-$tag.json" --server-logs "$OUT/ttft-logs-$m-$tag" > "$OUT/ttft-$m-$tag.txt" 2>&1
		echo "ttft $m $tag: rc=$?"
		grep -E '^  (mlxgo|mlx_lm):' "$OUT/ttft-$m-$tag.txt"
		keep "$OUT/ttft-$m-$tag.json" "$OUT/ttft-$m-$tag.txt"
	done
}

stage_hostcost() {
	local m
	for m in llama1b-bf16 llama1b-q4g64; do
		[ -d "$W/big/$m" ] || continue
		(cd models && MLXGO_NATIVE_DIR=$PACK MLXGO_BENCH_MODEL=$W/big/$m "$W/bin/models.test" -test.run '^$' \
			-test.bench 'SmolLM2(BuildStep|Decode)' -test.benchtime 200x) 2>&1 | tee "$OUT/hostcost-$m.txt" | grep -E '^Bench|FAIL|ok'
		"$PY" testdata/gpu/hostcost_mlxlm.py --model "$W/big/$m" --steps 200 2>&1 | tee -a "$OUT/hostcost-$m.txt" | grep '^mlx-lm'
		keep "$OUT/hostcost-$m.txt"
	done
}

# prompt_file writes the CLI runs' prompt (250 words, ~500 tokens) to $W/genhost-prompt.txt.
prompt_file() { seq -f 'word%g' 250 | tr '\n' ' ' > "$W/genhost-prompt.txt"; }

# cli_trace MODEL FILE: mlxgo generate on that prompt, 256 tokens, a line a step and the
# --json-stats line (last) on stderr into FILE.
cli_trace() {
	prompt_file
	MLXGO_TRACE_STEPS=1 "$W/bin/mlxgo" generate -m "$W/big/$1" --raw --temp 0 --ignore-eos --max-tokens 256 \
		--json-stats < "$W/genhost-prompt.txt" > /dev/null 2> "$2"
	echo "cli $1: rc=$? $(tail -n 1 "$2")"
}

stage_genhost() {
	export MLXGO_NATIVE_DIR=$PACK
	local m r p
	for m in ${GENHOST_SHAPES:-llama1b-bf16 llama1b-q4g64}; do
		[ -d "$W/big/$m" ] || { log "genhost: $m not made (run big1b first)"; continue; }
		for r in $(seq "${GENHOST_ROUNDS:-3}"); do
			for p in ${GENHOST_PROMPTS:-32 512}; do
				echo "genhost $m prompt $p round $r" | tee -a "$OUT/genhost-$m.txt"
				MLXGO_BENCH_MODEL=$W/big/$m MLXGO_BENCH_PROMPT_TOKENS=$p "$W/bin/gen.test" -test.run '^$' \
					-test.bench GenerateHost -test.benchtime 200x 2>&1 | tee -a "$OUT/genhost-$m.txt" | grep -E '^Bench|FAIL'
			done
		done
		MLXGO_BENCH_MODEL=$W/big/$m MLXGO_BENCH_PROMPT_TOKENS=512 "$W/bin/gen.test" -test.run '^$' -test.bench 'GenerateHost/generate' \
			-test.benchtime 1000x -test.cpuprofile "$OUT/genhost-$m.pprof" 2>&1 | tee -a "$OUT/genhost-$m.txt" | grep -E '^Bench|FAIL'
		cli_trace "$m" "$OUT/genhost-cli-$m.trace"
		keep "$OUT/genhost-$m.txt" "$OUT/genhost-$m.pprof"
	done
}

stage_ctxcost() {
	export MLXGO_NATIVE_DIR=$PACK
	local m=${CTX_SHAPE:-llama1b-q4g64} r p
	[ -d "$W/big/$m" ] || { log "ctxcost: $m not made (run big1b first)"; return 1; }
	for r in $(seq "${CTX_ROUNDS:-3}"); do
		for p in ${CTX_PROMPTS:-32 512}; do
			echo "ctxcost $m prompt $p round $r" | tee -a "$OUT/ctxcost-$m.txt"
			MLXGO_BENCH_MODEL=$W/big/$m MLXGO_BENCH_PROMPT_TOKENS=$p "$W/bin/gen.test" -test.run '^$' \
				-test.bench 'GenerateHost/(loop|generate)' -test.benchtime 200x 2>&1 | tee -a "$OUT/ctxcost-$m.txt" | grep -E '^Bench|FAIL'
			"$PY" testdata/gpu/hostcost_mlxlm.py --model "$W/big/$m" --steps 200 --only pipelined --prompt-tokens "$p" 2>&1 |
				tee -a "$OUT/ctxcost-$m.txt" | grep -E '^mlx-lm|Error'
		done
	done
	cli_trace "$m" "$OUT/ctxcost-cli-$m.trace"
	keep "$OUT/ctxcost-$m.txt" "$OUT/ctxcost-cli-$m.trace"
}

stage_steps() {
	export MLXGO_NATIVE_DIR=$PACK
	local m=${CTX_SHAPE:-llama1b-q4g64} r
	[ -d "$W/big/$m" ] || { log "steps: $m not made (run big1b first)"; return 1; }
	for r in $(seq "${STEPS_ROUNDS:-2}"); do
		cli_trace "$m" "$OUT/steps-mlxgo-$m-$r.trace"
		sed -n 's/.*decode 1 rows \([0-9.]*\) ms.*/\1/p' "$OUT/steps-mlxgo-$m-$r.trace" | sed '1d;$d' > "$OUT/steps-mlxgo-$m-$r.txt"
		MLXGO_BENCH_STEP_TIMES=$OUT/steps-mlxlm-$m-$r.txt MLXGO_ORACLE_DEVICE=gpu "$PY" models/testdata/oracle/bench_ref.py \
			--model "$W/big/$m" --prompt-file "$W/genhost-prompt.txt" --max-tokens 256 > /dev/null 2>&1
		sed -i '1d' "$OUT/steps-mlxlm-$m-$r.txt"
		for f in "$OUT/steps-mlxgo-$m-$r.txt" "$OUT/steps-mlxlm-$m-$r.txt"; do
			"$PY" -c 'import os,sys,statistics as s
v=sorted(float(x) for x in open(sys.argv[1]) if x.strip()); m=s.median(v); n=os.path.basename(sys.argv[1])
print(f"{n}: {len(v)} steps, median {m:.2f} ms, p90 {v[int(len(v)*.9)]:.2f}, mean {s.mean(v):.2f}, over 1.25x median {sum(x>1.25*m for x in v)/len(v):.0%}")' "$f" | tee -a "$OUT/steps-$m.txt"
		done
	done
	tar -czf "$OUT/steps-$m.tar.gz" -C "$OUT" $(cd "$OUT" && ls steps-mlx*-$m-*.txt)
	keep "$OUT/steps-$m.txt" "$OUT/steps-$m.tar.gz"
}

stage_graphs() {
	export MLXGO_NATIVE_DIR=$PACK
	local m=${GRAPHS_SHAPE:-llama1b-q4g64} d=$W/graphs n
	[ -d "$W/big/$m" ] || { log "graphs: $m not made (run big1b first)"; return 1; }
	rm -rf "$d"
	for n in 4 20; do
		mkdir -p "$d/mlxgo-$n" "$d/mlxlm-$n"
		(cd models && MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$d/mlxgo-$n/g MLXGO_BENCH_MODEL=$W/big/$m "$W/bin/models.test" \
			-test.run '^$' -test.bench 'SmolLM2Decode/sync' -test.benchtime ${n}x) 2>&1 | grep -E '^Bench|FAIL'
		MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$d/mlxlm-$n/g "$PY" testdata/gpu/hostcost_mlxlm.py --model "$W/big/$m" --steps $n --only sync
	done
	"$PY" testdata/gpu/graphs.py --steps 16 "mlxgo=$d/mlxgo-4,$d/mlxgo-20" "mlx-lm=$d/mlxlm-4,$d/mlxlm-20" > "$OUT/graphs-$m.txt" 2>&1
	head -60 "$OUT/graphs-$m.txt"
	# one decode step's graphs from each side, to read
	mkdir -p "$OUT/graphs-$m-dot" && for n in mlxgo mlxlm; do
		ls "$d/$n-20"/*.dot | sort -t_ -k2 -n | tail -8 | while read -r f; do cp "$f" "$OUT/graphs-$m-dot/$n-$(basename "$f")"; done
	done
	tar -czf "$OUT/graphs-$m-dot.tar.gz" -C "$OUT" "graphs-$m-dot"
	keep "$OUT/graphs-$m.txt" "$OUT/graphs-$m-dot.tar.gz"
}

stage_moeprobe() {
	carried_models
	"$PY" testdata/gpu/moe_probe.py "$MLXGO_ORACLE_DIR/models" > "$OUT/moe-probe.txt" 2>&1
	local rc=$?
	"$PY" testdata/gpu/moe_probe.py "$MLXGO_ORACLE_DIR/models" cpu >> "$OUT/moe-probe.txt" 2>&1 || rc=1
	"$PY" testdata/gpu/moe_probe.py "$MLXGO_ORACLE_DIR/models" poison >> "$OUT/moe-probe.txt" 2>&1 || rc=1
	grep -v '^$' "$OUT/moe-probe.txt" | tail -30
	keep "$OUT/moe-probe.txt"
	return $rc
}

stage_summary() {
	"$PY" testdata/gpu/summary.py "$W"/results/bench-*.json | tee "$OUT/bench-summary.txt"
	keep "$OUT/bench-summary.txt"
}

for s in "$@"; do
	if [ "$SECONDS" -gt "$DEADLINE" ] && [ "$s" != summary ]; then
		log "$s: skipped (past DEADLINE=${DEADLINE}s)"
		continue
	fi
	log "$s"
	"stage_$s" 2>&1 | tee "$OUT/stage-$s.log"
	log "$s: rc=${PIPESTATUS[0]}"
done
# Back: the summary, the key reports, and every log of this and earlier calls on
# this warm machine in one tarball.
cp -f "$OUT/summary.txt" "$RET/" 2>/dev/null
for f in verify-native.txt bench-summary.txt; do [ -f "$W/results/$f" ] && cp -f "$W/results/$f" "$RET/"; done
tar -czf "$RET/logs.tar.gz" -C "$W" out results 2>/dev/null
true
