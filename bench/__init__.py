"""warpcode.kernels.bench: benchmarks (bench_moe, bench_gemv), tuners (tune_warp_decode, tune_expert_centric) and
GPU timing: nothing the runtime calls. The tuners write ../warp_decode_configs.json, which the kernels read through
../tuning.py; counters.py stays beside decode_attention.py, which uses it at run time."""
