#!/usr/bin/env bash
# What tprimat measures on one GPU, end to end, in a few minutes (about two on an H200).
#
#   bash bench/gpu_node.sh OUTDIR
#
# Runs, each step under its own time limit so that one hang does not cost the rest:
#   1. tprimat detect and doctor: the hardware identity and the conditions that distort numbers;
#   2. tprimat microbench all for llama3.1-8b's GEMM shapes and attention (bf16, fp8);
#   3. a short torch-backend run of llama3.1-tiny with profiler traces and an allocator
#      snapshot (every GPU path of `tprimat run`, in seconds);
#   4. a short torch-backend run of llama3.1-8b on this one GPU (recompute full, sequence
#      2048, global batch 1), profiled, beside the memory estimate of the same config;
#   5. tprimat trace analyze of both runs' traces and tprimat memory summarize of the snapshot.
# Every command and its exit status is appended to OUTDIR/steps.tsv; the outputs stay in
# OUTDIR.  Needs torch with a GPU and transformers (the `ml` extra, or the vendor's build).
set -u
OUTDIR=${1:?usage: bench/gpu_node.sh OUTDIR}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
STEPS="$OUTDIR/steps.tsv"
printf 'step\tstatus\tseconds\tcommand\n' >"$STEPS"

# step NAME LIMIT_S COMMAND...: run COMMAND with stdout to NAME.out and stderr to NAME.err.
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS status
    timeout --kill-after=10 "$limit" "$@" >"$OUTDIR/$name.out" 2>"$OUTDIR/$name.err"
    status=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" "$*" >>"$STEPS"
    echo "== $name: exit $status in $((SECONDS - start)) s"
    return 0
}

RUNS="$OUTDIR/runs"
# The runs report achieved TFLOP/s against the matmul ceiling measured in step 2.
export TPRIMAT_MICROBENCH_DIR="$OUTDIR/microbench"
BIG=(--set training.seq_length=2048 --set training.global_batch_size=1 --set training.recompute=full
    --set launch.nproc_per_node=1)

step detect 60 tprimat detect --json
step doctor 60 tprimat doctor --json --output "$RUNS"
step microbench 150 tprimat microbench all --model llama3.1-8b --dtype bf16,fp8 --sweep-radius 1 \
    --iterations 20 --json -o "$OUTDIR/microbench"
step run-tiny 120 tprimat run --backend torch --model llama3.1-tiny --nproc-per-node 1 --iterations 20 \
    --set training.seq_length=2048 --set training.global_batch_size=8 \
    --profile --memory-snapshot --output "$RUNS" --run-id tiny
step estimate-8b 30 tprimat memory estimate --backend torch --model llama3.1-8b "${BIG[@]}" --json
step run-8b 240 tprimat run --backend torch --model llama3.1-8b "${BIG[@]}" --iterations 30 \
    --profile --output "$RUNS" --run-id llama3.1-8b
step trace-tiny 60 tprimat trace analyze "$RUNS/tiny/traces" --json
step trace-8b 120 tprimat trace analyze "$RUNS/llama3.1-8b/traces" --json
snapshot=$(find "$RUNS/tiny" -name "snapshot-rank*.pickle" 2>/dev/null | head -n 1)
if [ -n "$snapshot" ]; then step memory-tiny 60 tprimat memory summarize "$snapshot" --json; fi
cat "$STEPS"
