#!/bin/sh
# ggml_cpu_args.sh — the CMake options that build llama.cpp (bench-cpu's peer)
# for the SIMD extensions this CPU lists in /proc/cpuinfo, AMX excepted: see
# the Makefile's bench-venv rule for why GGML_NATIVE is not used.
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
out="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
for p in sse4_2:SSE42 f16c:F16C fma:FMA bmi2:BMI2 avx:AVX avx2:AVX2 avx_vnni:AVX_VNNI avx512f:AVX512 \
  avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
  case "$flags" in
  *" ${p%%:*} "*) out="$out -DGGML_${p##*:}=ON" ;;
  *) out="$out -DGGML_${p##*:}=OFF" ;;
  esac
done
echo "$out"
