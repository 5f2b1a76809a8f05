#!/usr/bin/env bash
# One device call: install, GPU tests, warp-decode tuning and the MoE benchmarks, logs under $OUT.
# Usage (on the GPU machine, from the repository root):
#   bash experiments/gpu_session.sh [install] [tests] [tune] [tune-centric] [bench] [pdl] [decode-tests] [profile] [decode] [decode-hf] [gemv]
#       [attention] [small] [variants] [moe-small] [boundaries] [pytest] [ab] [serve] [prefill] [prefill-attention]
#       [ab-prefill-attention] [ab-turn] [ab-mx] [mx-configs] [mx-linear-variants] [ab-cmd] [mx-tests] [mx-gemv] [mx-tune] [mx-bench] [mx-decode] [mx-accuracy] [mx-sweep] [mx-ncu]
# ab: decode of this tree against a base tree made here with `git archive REF -o ab_base.tar` (an untracked file in
# the repository root travels with the working tree), alternating AB_ROUNDS times in one call.
set -uo pipefail
OUT=${OUT:-/tmp/warpcode-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
steps=${*:-tests tune bench}

python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1
if ! (cd /tmp && python3 -c "import warpcode.kernels, warpcode.agent.cli") >>"$OUT/install.log" 2>&1; then
    echo "the editable install does not import here (see install.log); importing from a linked tree instead"
    mkdir -p /tmp/warpcode-src/warpcode
    for folder in agent tools kernels model_runtime; do ln -sfn "$PWD/$folder" "/tmp/warpcode-src/warpcode/$folder"; done
    export PYTHONPATH=/tmp/warpcode-src
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
git log -1 --format='commit %H' 2>/dev/null | tee -a "$OUT/device.txt"

# run_ab LOG COMMAND...: COMMAND in this tree, then in the base tree (ab_base.tar), AB_ROUNDS times, each output
# line prefixed with its tree and round and appended to $OUT/LOG; this tree is installed again at the end.
run_ab() {
    local log=$1 base=/tmp/warpcode-ab-base
    shift
    rm -rf "$base" && mkdir -p "$base" && tar -xf "${AB_BASE:-ab_base.tar}" -C "$base"
    for round in $(seq "${AB_ROUNDS:-2}"); do
        for tree in "$PWD" "$base"; do
            (cd "$tree" && python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 &&
                "$@" 2>>"$OUT/ab_err.log" | sed "s|^|$tree round $round |" >>"$OUT/$log")
        done
    done
    python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1
}

# run_variants LOG RUNNER VARIANT...: `RUNNER VARIANT` (printing `bench decode --json` lines) for each variant,
# AB_ROUNDS rounds alternating, each line prefixed with the variant's name (up to any "=") and round and appended to
# $OUT/LOG; then each variant's rate against the first's.
run_variants() {
    local log=$1 runner=$2 round variant
    shift 2
    for round in $(seq "${AB_ROUNDS:-2}"); do
        for variant in "$@"; do
            "$runner" "$variant" 2>>"$OUT/${log%.log}_err.log" | sed "s|^|${variant%%=*} round $round |" >>"$OUT/$log"
        done
    done
    python3 experiments/show_decode_variants.py <"$OUT/$log"
}

# MX decode under the config file VARIANT ("package": the package's own), or under mx_linear's decode tiles of
# NAME=SPEC (experiments/mx_linear_variant.py)
decode_under_config_file() {
    WARPCODE_WARP_DECODE_CONFIGS=$([ "$1" = package ] || echo "$PWD/$1") python3 -m warpcode.agent bench decode \
        --preset qwen3-30b-a3b --random-weights --weights mxfp8 --batch ${DECODE_BATCH:-1,8} \
        --context ${DECODE_CONTEXT:-512} --prefill 0 --json
}
decode_under_mx_linear_spec() {
    python3 experiments/mx_linear_variant.py "${1#*=}" bench decode --preset qwen3-30b-a3b --random-weights \
        --weights mxfp8 --batch ${DECODE_BATCH:-2,4,8} --context ${DECODE_CONTEXT:-512,8192} --prefill 0 --json
}

for step in $steps; do
    case $step in
    install) ;;  # only the install above (no step named runs the default ones: tests tune bench)
    tests)
        python3 -c 'import triton, triton.language.extra.cuda as c; print("triton", triton.__version__, c.gdc_wait)'
        python3 -m pytest -q -m gpu tests/kernels tests/model_runtime -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -25 ;;
    tune)
        # shape:largest batch (mixtral's experts are 235 MB each: beyond 16 tokens the expert-centric path wins)
        for shape_batches in ${TUNE_SHAPES:-2048,768,128,8:128 2048,1024,64,8:128 4096,14336,8,2:16}; do
            shape=${shape_batches%:*}
            batches=$(python3 -c "import sys; print(','.join(str(b) for b in (1,2,4,8,16,32,64,128) if b <= ${shape_batches#*:}))")
            python3 -m warpcode.bench.tune_warp_decode --shape $shape --batch $batches --write kernels/warp_decode_configs.json \
                2>&1 | tee -a "$OUT/tune.log" | python3 experiments/show_tune.py
        done
        cp kernels/warp_decode_configs.json "$OUT/" ;;
    tune-centric)  # the expert-centric path's grouped-GEMM tiles past warp decode's crossover (CENTRIC_FLAGS="--weights mxfp8")
        for shape in ${CENTRIC_SHAPES:-2048,768,128,8}; do
            python3 -m warpcode.bench.tune_expert_centric --shape $shape --batch ${CENTRIC_BATCH:-16,32,64,128} \
                ${CENTRIC_FLAGS:-} --write kernels/warp_decode_configs.json 2>&1 | tee -a "$OUT/tune_centric.log"
        done
        cp kernels/warp_decode_configs.json "$OUT/" ;;
    bench)
        for shape in ${BENCH_SHAPES:-2048,768,128,8 2048,1024,64,8 4096,14336,8,2}; do
            python3 -m warpcode.agent bench moe --shape $shape --batch 1,2,4,8,16,32,64,128 --json \
                2>>"$OUT/bench_err.log" | tee -a "$OUT/bench_moe.jsonl" \
                | python3 experiments/show_bench.py
        done ;;
    decode-tests)
        python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/kernels/test_decode_attention_gpu.py \
            tests/kernels/test_decode_small_kernels_gpu.py tests/kernels/test_gemv_gpu.py \
            tests/model_runtime/test_sampling_device.py tests/model_runtime/test_decode_gpu.py 2>&1 | tee "$OUT/decode_tests.log" | tail -30 ;;
    pytest)  # any GPU test files: PYTEST_FILES="tests/model_runtime/test_gpu.py ..."
        python3 -m pytest -q -m gpu -p no:cacheprovider ${PYTEST_FILES:-tests/kernels tests/model_runtime} 2>&1 \
            | tee "$OUT/pytest.log" | tail -15 ;;
    profile)
        python3 -m warpcode.bench.profile_decode --batch ${PROFILE_BATCH:-1} ${PROFILE_FLAGS:-} 2>&1 | tee -a "$OUT/profile.log" | tail -45 ;;
    gemv)
        python3 -m warpcode.bench.gemv --shapes 5120x2048,2048x4096,128x2048 --batch ${GEMV_BATCH:-1,4,8,16} \
            ${GEMV_FLAGS:---quick} 2>&1 | tee "$OUT/bench_gemv.log" | tail -40 ;;
    attention)
        python3 experiments/sweep_attention.py 2>&1 | tee "$OUT/sweep_attention.log" ;;
    variants)  # batch-1 graph step under L2-prefetch variants and one-kernel-kind ablations
        python3 experiments/sweep_decode_variants.py ${VARIANT_FLAGS:-} 2>&1 | tee -a "$OUT/variants.log" ;;
    small)
        python3 experiments/sweep_small_kernels.py 2>&1 | tee "$OUT/sweep_small.log" ;;
    boundaries)  # what a kernel boundary costs in a graph, and when PDL secondaries start and pass gdc_wait
        python3 experiments/kernel_chain.py 2>&1 | tee "$OUT/kernel_chain.log"
        python3 experiments/probe_pdl.py 2>&1 | tee "$OUT/probe_pdl.log" ;;
    decode)
        python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights --batch ${DECODE_BATCH:-1,8,32} \
            --context ${DECODE_CONTEXT:-512,8192} ${DECODE_FLAGS:-} --json 2>"$OUT/decode_err.log" \
            | sed "s|^|${DECODE_FLAGS:-default} |" | tee -a "$OUT/bench_decode.jsonl"
        tail -5 "$OUT/decode_err.log" ;;
    serve)  # the serving engine: concurrency, multi-turn trace, long prompt under load, cold prefill (+ static reference)
        python3 -m warpcode.agent bench serve --preset qwen3-30b-a3b --random-weights ${SERVE_FLAGS:-} --json \
            2>"$OUT/serve_err.log" | tee -a "$OUT/bench_serve.jsonl"
        tail -5 "$OUT/serve_err.log" ;;
    prefill-attention)  # one layer's prefill attention: the paged Triton kernel against gather + SDPA
        python3 experiments/sweep_prefill_attention.py ${PREFILL_ATTENTION_FLAGS:-} 2>&1 | tee -a "$OUT/prefill_attention.log" ;;
    prefill)  # cold prefill per chunk budget, and a profile of the longest
        python3 experiments/sweep_prefill.py ${PREFILL_FLAGS:-} 2>&1 | tee -a "$OUT/prefill.log" | tail -45 ;;
    decode-hf)
        python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights --batch 1 --context 512 \
            --steps 16 --prefill 0 --compare-hf --json 2>"$OUT/decode_hf_err.log" | tee -a "$OUT/bench_decode_hf.jsonl"
        tail -5 "$OUT/decode_hf_err.log" ;;
    moe-small)  # the qwen3 layer at batch 1-8, our two paths only
        python3 -m warpcode.agent bench moe --shape 2048,768,128,8 --batch 1,2,4,8 --paths warp-decode,expert-centric \
            --json 2>>"$OUT/bench_err.log" | tee -a "$OUT/bench_moe_small.jsonl" | python3 experiments/show_bench.py ;;
    ab)
        run_ab ab.log python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights \
            --batch ${DECODE_BATCH:-1} --context ${DECODE_CONTEXT:-512,8192} --prefill 0 --json
        cat "$OUT/ab.log" ;;
    mx-configs)  # MX decode under the package's config file, then each of CONFIG_VARIANTS (files made here by
        # experiments/config_variant.py: untracked files in the repository root travel), AB_ROUNDS rounds alternating
        run_variants mx_configs.log decode_under_config_file package ${CONFIG_VARIANTS:?name the variant files} ;;
    mx-linear-variants)  # MX decode under mx_linear's decode-batch default, then each of MX_LINEAR_VARIANTS
        # ("NAME=SPEC ...", SPEC as experiments/mx_linear_variant.py reads it), AB_ROUNDS rounds alternating
        run_variants mx_linear_variants.log decode_under_mx_linear_spec package= ${MX_LINEAR_VARIANTS:?name the variants} ;;
    ab-cmd)  # any command (AB_CMD, run in each tree's root) in this tree then the base (as ab), appended to ab_cmd.log
        run_ab ab_cmd.log bash -c "$AB_CMD"
        grep -v '^$' "$OUT/ab_cmd.log" | tail -${AB_TAIL:-40} ;;
    ab-mx)  # MX decode of this tree against the base (as ab; DECODE_BATCH, DECODE_CONTEXT)
        run_ab ab_mx.log python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights \
            --weights mxfp8 --batch ${DECODE_BATCH:-1,8} --context ${DECODE_CONTEXT:-512} --prefill 0 --json
        python3 experiments/show_decode_variants.py <"$OUT/ab_mx.log" ;;
    ab-turn)  # a cached agent turn (16K cached + 300 new) and a cold 2K prefill, this tree then the base (as ab; TURN_FLAGS="--weights mxfp8")
        run_ab ab_turn.log python3 "$PWD/experiments/sweep_prefill.py" --lengths 2048 --budgets 16384 --profile 16384 ${TURN_FLAGS:-}
        grep -E "cached turn|budget|_paged_prefill_attention_kernel|_qk_norm_rope" "$OUT/ab_turn.log" ;;
    ab-prefill-attention)  # one layer's prefill attention (kernel + split merge), this tree then the base (as ab)
        run_ab ab_prefill_attention.log python3 "$PWD/experiments/sweep_prefill_attention.py" \
            --cases ${PREFILL_ATTENTION_CASES:-300:16000,384:16000,1024:31000}
        cat "$OUT/ab_prefill_attention.log" ;;
    mx-tests)  # MXFP8: the quantiser, every MX kernel, the runtime on MX weights, and the bf16 decode tests beside them
        python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_mx.py tests/kernels/*mx*_gpu.py \
            tests/model_runtime/test_mx_gpu.py ${MX_TEST_EXTRA:-} 2>&1 | tee "$OUT/mx_tests.log" | tail -25 ;;
    mx-gemv)  # MX GEMV / mx_linear / dequantise + cuBLAS against bf16 cuBLAS, per shape and row count
        python3 -m warpcode.bench.gemv --weights mxfp8 --shapes ${MX_GEMV_SHAPES:-5120x2048,2048x4096,2048x768} \
            ${MX_GEMV_FLAGS:-} 2>&1 | tee "$OUT/mx_gemv.log" | tail -40 ;;
    mx-tune)  # MX warp decode tiles + crossover, then the MX grouped-GEMM tiles; the file comes back under $OUT
        python3 -m warpcode.bench.tune_warp_decode --weights mxfp8 --shape 2048,768,128,8 \
            --batch ${MX_TUNE_BATCH:-1,2,4,8,16} --write kernels/warp_decode_configs.json 2>&1 | tee -a "$OUT/mx_tune.log" | tail -20
        python3 -m warpcode.bench.tune_expert_centric --weights mxfp8 --shape 2048,768,128,8 \
            --batch ${MX_CENTRIC_BATCH:-16,32,64,128} --write kernels/warp_decode_configs.json 2>&1 | tee -a "$OUT/mx_tune.log" | tail -8
        cp kernels/warp_decode_configs.json "$OUT/" ;;
    mx-bench)  # one MoE layer with bf16 and MX weights in the same run
        python3 -m warpcode.agent bench moe --shape 2048,768,128,8 --batch ${MX_BENCH_BATCH:-1,2,4,8,16,32,64,128} \
            --weights bf16,mxfp8 --json 2>>"$OUT/bench_err.log" | tee -a "$OUT/bench_moe_mx.jsonl" | python3 experiments/show_bench.py ;;
    mx-decode)  # whole-model decode, bf16 then MX then bf16 (same call: ratios, not absolutes)
        for weights in bf16 mxfp8 ${MX_DECODE_REPEAT:-}; do
            python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights --weights $weights \
                --batch ${DECODE_BATCH:-1,8,32} --context ${DECODE_CONTEXT:-512,8192} --json 2>>"$OUT/decode_err.log" \
                | tee -a "$OUT/bench_decode_mx.jsonl"
        done
        tail -3 "$OUT/decode_err.log" ;;
    mx-sweep)  # the batch-1 MX kernels against bf16 over a few tiles; MX_SWEEP_ENV="A=1 B=2" runs it once per setting; MX_SWEEP_FLAGS="--capped-only --register-caps 128,112"
        for setting in ${MX_SWEEP_ENV:-none=0}; do
            env $setting python3 experiments/sweep_mx_kernels.py --tokens ${MX_SWEEP_TOKENS:-1,8} ${MX_SWEEP_FLAGS:-} 2>&1 \
                | sed "s|^|$setting |" | tee -a "$OUT/sweep_mx.log"
        done ;;
    mx-ncu)  # hardware counters of the batch-1 warp decode and q/k/v GEMV kernels, bf16 and MX (--once launches)
        for setting in ${MX_SWEEP_ENV:-none=0}; do
            env $setting ncu --clock-control none -k regex:'_gate_up_kernel|_down_kernel|_gemv_kernel' \
                --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
                --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
                --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active \
                python3 experiments/sweep_mx_kernels.py --once >"$OUT/ncu_${setting//=/_}.txt" 2>&1
            grep -E '^  _|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|pct_of_peak|Registers Per|Achieved Occ|Local' \
                "$OUT/ncu_${setting//=/_}.txt" | head -150
        done ;;
    mx-accuracy)  # a small qwen3_moe trained here on the machine's Python files; perplexity bf16 vs MXFP8
        python3 -m warpcode.bench.mx_accuracy --device cuda --train-seconds ${MX_TRAIN_SECONDS:-180} --out "$OUT/mx_accuracy.json" \
            2>&1 | tee "$OUT/mx_accuracy.log" | tail -30 ;;
    pdl)
        for pdl in 0 1; do
            echo "WARPCODE_DISABLE_PDL=$pdl"
            WARPCODE_DISABLE_PDL=$pdl python3 -m warpcode.agent bench moe --shape 2048,768,128,8 --batch 1,2,4,8 \
                --paths warp-decode,expert-centric --json 2>/dev/null | python3 experiments/show_bench.py | tee -a "$OUT/pdl.log"
        done ;;
    esac
done
