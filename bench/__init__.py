"""warpcode.bench: every benchmark and tuner, and nothing the product calls (only `warpcode bench` imports it).

- Kernels: `moe` (one MoE layer per path), `gemv` (dense projections against cuBLAS), `timing` (CUDA-graph timing
  and copy bandwidth); the tuners `tune_warp_decode` and `tune_expert_centric` write the tuned tables the kernels
  read (warpcode.kernels' device config files, through `config_file`).
- The runtime: `decode` (whole-model decode against the copy-bandwidth roofline, cold prefill), `serve` (the serving
  engine under concurrent streams), `profile_decode` (where a step's time goes), `mx_accuracy` (what MXFP8 costs in
  quality), `speculative_acceptance` (the suffix drafter's acceptance on real commits under teacher forcing, CPU,
  from a checkout: it reads tests/fixtures), `speculative_engine` (speculative decoding end to end through the
  engine at batch 1, off against suffix and ngram).
- The agent side: `tools` (search, edit, patch, code map on a generated tree), `service` (many ACP sessions on one
  `warpcode serve`), `batch` and `batch_replicas` (the batch driver, alone and with model replicas on Ray),
  `hostile_model_server` (what hostile clients cost everyone else).
- Against references nobody here wrote, run from a checkout (they read tests/fixtures): `toolcall_cases` (vLLM's and
  SGLang's parser cases), `edit_corpus` and `patch_corpus` (real commits, `git apply`), `search_vs_ripgrep`,
  `outline_vs_ctags`, `time_edit_not_found`.

Each runs as `python -m warpcode.bench.NAME --help`; results go to BENCHMARKS.md.
"""
