#!/usr/bin/env bash
# Every GPU measurement of bertedu against transformers.BertForPreTraining, in one go:
# BERT-BASE at sequence lengths 128 and 512, bertedu readable / sdpa / fast against
# transformers (sdpa attention), bf16 autocast and fused AdamW for both, the padding rows
# on a ragged batch, then a torch.compile pass (fast and transformers at the first length).
# Under 8 minutes on one H100/H200-class GPU; needs only PyTorch and transformers.
# The short table comes last.
#
#   bash benchmarks/gpu.sh                      # on the GPU machine, from anywhere
#   BENCH_OUT_DIR=/some/dir bash benchmarks/gpu.sh
#
# Environment overrides (defaults in brackets), e.g. the CPU smoke test:
#   BENCH_DEVICE=cpu BENCH_PRESETS=tiny BENCH_SEQ_LENS=32 BENCH_STEPS=2 bash benchmarks/gpu.sh
#   BENCH_DEVICE [cuda]  BENCH_PRESETS [base]  BENCH_SEQ_LENS [128,512]
#   BENCH_BATCH_SIZE [per length: 128 at 128, 32 at 512]  BENCH_STEPS [20]  BENCH_WARMUP [5]
#   BENCH_VARIANTS [readable,sdpa,fast]  BENCH_PRECISION [bf16 on cuda, fp32 on cpu]
#   BENCH_COMPILE [1 on cuda, 0 on cpu]  BENCH_COMPILE_BACKEND [inductor]
#   BENCH_THREADS [torch default]  BENCH_PEAK_TFLOPS [from the GPU's name]
#   BENCH_OUT_DIR [benchmarks/results]  PYTHON [python, else python3]
#   BENCH_EAGER_LIMIT_S [300]  BENCH_COMPILE_LIMIT_S [150]   hard wall-clock limits per pass
set -uo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python || command -v python3)}
DEVICE=${BENCH_DEVICE:-cuda}
OUT_DIR=${BENCH_OUT_DIR:-benchmarks/results}
SEQ_LENS=${BENCH_SEQ_LENS:-128,512}
if [ "$DEVICE" = cuda ]; then COMPILE_DEFAULT=1; else COMPILE_DEFAULT=0; fi
COMPILE=${BENCH_COMPILE:-$COMPILE_DEFAULT}
EAGER_LIMIT=${BENCH_EAGER_LIMIT_S:-300}
COMPILE_LIMIT=${BENCH_COMPILE_LIMIT_S:-150}
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/gpu_eager.json" "$OUT_DIR/gpu_compiled.json"

common=(--device "$DEVICE" --presets "${BENCH_PRESETS:-base}"
        --steps "${BENCH_STEPS:-20}" --warmup "${BENCH_WARMUP:-5}")
[ -n "${BENCH_BATCH_SIZE:-}" ] && common+=(--batch-size "$BENCH_BATCH_SIZE")
[ -n "${BENCH_PRECISION:-}" ] && common+=(--precision "$BENCH_PRECISION")
[ -n "${BENCH_THREADS:-}" ] && common+=(--threads "$BENCH_THREADS")
[ -n "${BENCH_PEAK_TFLOPS:-}" ] && common+=(--peak-tflops "$BENCH_PEAK_TFLOPS")

# A hard limit per pass (coreutils timeout, where there is one); bench.py also stops
# starting new measurements once its own budget is spent, and keeps every finished row.
limit() { if command -v timeout >/dev/null; then timeout "$@"; else shift; "$@"; fi; }

[ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null && \
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv,noheader
start=$SECONDS

echo "== pass 1: eager, every variant, every length, padding rows"
limit "$EAGER_LIMIT" "$PY" benchmarks/bench.py "${common[@]}" --seq-lens "$SEQ_LENS" \
    --variants "${BENCH_VARIANTS:-readable,sdpa,fast}" --ragged \
    --time-budget-s $((EAGER_LIMIT - 60)) --json "$OUT_DIR/gpu_eager.json"
status=$?
if [ $status -ne 0 ]; then
    echo "pass 1 exited with status $status after $((SECONDS - start)) s (finished rows are kept)"
    [ "${COMPILE}" = 1 ] || { "$PY" benchmarks/bench.py --merge "$OUT_DIR/gpu_eager.json"; exit $status; }
fi

if [ "$COMPILE" = 1 ]; then
    echo "== pass 2: torch.compile, fast vs transformers at T=${SEQ_LENS%%,*}; then the table of both passes"
    limit "$COMPILE_LIMIT" "$PY" benchmarks/bench.py "${common[@]}" --seq-lens "${SEQ_LENS%%,*}" \
        --variants fast --no-ragged --compile --compile-backend "${BENCH_COMPILE_BACKEND:-inductor}" \
        --json "$OUT_DIR/gpu_compiled.json" --prepend "$OUT_DIR/gpu_eager.json" && exit 0
    echo "pass 2 (compile) did not finish after $((SECONDS - start)) s; the eager results stand"
    "$PY" benchmarks/bench.py --merge "$OUT_DIR/gpu_eager.json" "$OUT_DIR/gpu_compiled.json"
    exit
fi
# without the compile pass, pass 1's table above is the last thing printed
exit $status
