"""Compiles kernels for Hopper (sm_90) on this machine, GPU or not, and exits non-zero naming each one that fails.

The CPU interpreter runs a kernel's Python as Python, so a constexpr branch that does not apply is never looked at
there; Triton's code generator compiles it anyway (a `return` inside a constexpr `if` does not end code generation),
and a launch on the GPU then fails. Run by tests/kernels/test_compile_sm90.py in a process of its own, without
TRITON_INTERPRET, so that @triton.jit gives compilable functions.
"""

from __future__ import annotations

import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from warpcode.kernels import decode_attention, expert_centric, mx_down, mx_linear, prefill_attention

# Pointers are 16-byte aligned and these integers multiples of 16, as the launcher would specialise them; without
# it the loads are not vectorised and not pipelined, which is not the code the GPU runs.
DIVISIBLE = {
    "K_DIM", "N", "H", "I", "K", "stride_am", "stride_be", "stride_bn", "stride_cm", "stride_se", "stride_sn",
    "stride_xm", "stride_wn", "stride_ym", "stride_hs", "stride_we", "stride_wr", "stride_rt", "stride_ot",
}  # fmt: skip

GEMM = {
    "a_ptr": "*bf16", "b_ptr": "*bf16", "b_scales_ptr": "*bf16", "c_ptr": "*bf16", "slot_weights_ptr": "*fp32",
    "sorted_slots_ptr": "*i64", "block_expert_ptr": "*i64", "N": "i32", "K_DIM": "i32", "num_slots": "i32",
    "num_experts": "i32", "a_rows_per_slot_div": "i32", "stride_am": "i32", "stride_be": "i32", "stride_bn": "i32",
    "stride_se": "i32", "stride_sn": "i32", "stride_cm": "i32",
}  # fmt: skip
MX_GEMM = {**GEMM, "b_ptr": "*fp8e4nv", "b_scales_ptr": "*u8"}
GEMM_TILE = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "UPCAST_DOT_OPERANDS": False, "DOT_PRECISION": "tf32"}
PREFILL = {
    "q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "table_ptr": "*i32", "start_ptr": "*i32",
    "rows_ptr": "*i32", "out_ptr": "*bf16", "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "T": "i32",
    "S": "i32", "num_blocks": "i32", "qk_scale": "fp32", "stride_qt": "i32", "stride_qh": "i32", "stride_kb": "i32",
    "stride_kh": "i32", "stride_kn": "i32", "stride_vb": "i32", "stride_vh": "i32", "stride_vn": "i32",
    "stride_ot": "i32", "stride_oh": "i32",
}  # fmt: skip
PREFILL_SHAPE = {
    "D": 128, "G": 8, "TOKENS": 16, "ROWS": 128, "BLOCK_N": 64, "BLOCK_D": 128, "CACHE_BLOCK": 256,
    "DOT_DTYPE": "bf16", "DOT_PRECISION": "tf32", "ROWS_ON_DEVICE": True, "HQ": 32,
}  # fmt: skip

MX_LINEAR = {
    "x_ptr": "*bf16", "w_ptr": "*fp8e4nv", "scales_ptr": "*u8", "bias_ptr": "*bf16", "y_ptr": "*bf16",
    "partial_ptr": "*fp32", "counter_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "stride_xm": "i32",
    "stride_wn": "i32", "stride_sn": "i32", "stride_ym": "i32",
}  # fmt: skip

MX_DOWN = {
    "hidden_ptr": "*fp16", "w2_ptr": "*fp8e4nv", "w2_scales_ptr": "*u8", "topk_ids_ptr": "*i64",
    "topk_weights_ptr": "*fp32", "residual_ptr": "*bf16", "out_ptr": "*bf16", "partial_ptr": "*fp32",
    "counter_ptr": "*i32", "H": "i32", "I": "i32", **{name: "i32" for name in (
        "stride_hs", "stride_we", "stride_wr", "stride_se", "stride_sr", "stride_rt", "stride_ot")},
}  # fmt: skip

DECODE_ATTENTION = {
    "q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "seq_lens_ptr": "*i32", "out_ptr": "*bf16",
    "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "counter_ptr": "*i32", "S": "i32", "D": "i32",
    "qk_scale": "fp32", **{name: "i32" for name in (
        "stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh", "stride_vn",
        "stride_lens", "stride_ob", "stride_oh", "stride_mb", "stride_mh", "stride_ab", "stride_ah", "stride_as",
        "num_blocks", "stride_tb", "stride_tn")},
    "table_ptr": "*i32",
}  # fmt: skip

# (name, kernel, signature of the runtime arguments, constexprs, options)
CASES = [
    *(
        (f"grouped GEMM {fmt} gated={gated} slot weights={weighted}", expert_centric._grouped_gemm_kernel, sig,
         {**GEMM_TILE, "MUL_SLOT_WEIGHT": weighted, "GATED": gated, "IS_MX": fmt == "mx"},
         {"num_warps": 4, "num_stages": 3})
        for fmt, sig in (("bf16", GEMM), ("mx", MX_GEMM))
        for gated, weighted in ((True, False), (False, True))
    ),
    ("rank in chunk", expert_centric._rank_in_chunk_kernel,
     {"topk_ids_ptr": "*i64", "rank_ptr": "*i32", "chunk_counts_ptr": "*i32", "num_slots": "i32", "chunk": "i32"},
     {"BLOCK_E": 128, "SUB": 64}, {"num_warps": 4}),
    ("place slots", expert_centric._place_slots_kernel,
     {"topk_ids_ptr": "*i64", "rank_ptr": "*i32", "chunk_counts_ptr": "*i32", "sorted_slots_ptr": "*i64",
      "block_expert_ptr": "*i64", "num_slots": "i32", "num_experts": "i32", "capacity": "i32", "num_blocks": "i32",
      "chunk": "i32", "num_chunks": "i32"},
     {"BLOCK_M": 32, "BLOCK_E": 128, "BLOCK_P": 32, "SUB": 64, "BLOCK_Q": 64}, {"num_warps": 4}),
    ("sum slots", expert_centric._sum_slots_kernel, {"per_slot_ptr": "*bf16", "out_ptr": "*bf16", "H": "i32"},
     {"K": 8, "BLOCK_K": 8, "BLOCK_H": 1024}, {"num_warps": 4}),
    *(
        (f"prefill attention, {splits} splits", prefill_attention._paged_prefill_attention_kernel, PREFILL,
         {**PREFILL_SHAPE, "NUM_SPLITS": splits}, {"num_warps": 8, "num_stages": 3, "maxnreg": 128})
        for splits in (1, 6)
    ),
    *(
        (f"mx_linear, {label}", mx_linear._mx_linear_kernel, {k: v for k, v in MX_LINEAR.items() if k not in fixed},
         {**fixed, "BLOCK_M": 16, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 8, "SPLIT_K": splits,
          "HAS_BIAS": bias, "UPCAST_DOT_OPERANDS": False, "DOT_PRECISION": "tf32", "USE_PDL": True},
         {"num_warps": warps, "num_stages": stages})
        for label, block_n, block_k, splits, bias, fixed, warps, stages in (
            ("1 K shares", 16, 256, 1, True, {}, 2, 3),
            ("4 K shares", 16, 256, 4, True, {}, 2, 3),
            ("4 K shares, one row (M specialised)", 16, 256, 4, True, {"M": 1}, 2, 3),
            ("the default 16 x 64 x 128 tile, 4 warps, 2 stages, at one row", 64, 128, 4, False, {"M": 1}, 4, 2),
            ("the default 16 x 64 x 128 tile, 4 warps, 2 stages, o_proj to 8 rows", 64, 128, 16, False, {}, 4, 2),
        )
    ),
    *(
        (f"MX down on tensor cores, {label}", mx_down._down_mma_kernel,
         MX_DOWN if tokens else {**MX_DOWN, "T": "i32"}, {**({"T": tokens} if tokens else {}), "BLOCK_N": 64,
         "BLOCK_K": 128, "ALL_GROUPS": 32, "TOP_K": 8, "HAS_RESIDUAL": residual, "UPCAST_DOT_OPERANDS": False,
         "EVICTION": "evict_first", "USE_PDL": True, "FIRST_TILE_EARLY": early}, {"num_warps": 2, "num_stages": 3})
        for label, tokens, residual, early in (
            ("8 tokens, residual", None, True, False),
            ("one token (T specialised), first tile early", 1, False, True),
        )
    ),
    ("decode attention, paged, merged by the last split", decode_attention._decode_attention_kernel,
     DECODE_ATTENTION,
     {"G": 8, "NUM_SPLITS": 4, "DOT_DTYPE": "bf16", "DOT_PRECISION": "tf32", "BLOCK_G": 16, "BLOCK_N": 128,
      "BLOCK_D": 128, "MERGE_IN_KERNEL": True, "MERGE_G": 8, "MERGE_S": 4, "PAGED": True, "CACHE_BLOCK": 256,
      "TILE_IN_BLOCK": True, "USE_PDL": True}, {"num_warps": 8, "num_stages": 1}),
    ("prefill split merge", prefill_attention._merge_splits_kernel,
     {"m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "rows_ptr": "*i32", "out_ptr": "*bf16", "T": "i32",
      "stride_ot": "i32", "stride_oh": "i32"},
     {"D": 128, "G": 8, "HQ": 32, "NUM_SPLITS": 6, "BLOCK_G": 8, "BLOCK_S": 8, "BLOCK_D": 128,
      "ROWS_ON_DEVICE": True}, {"num_warps": 4}),
]  # fmt: skip


def compile_sm90(kernel: triton.JITFunction, signature: dict, constants: dict, options: dict):
    """The kernel compiled for sm_90 (triton's CompiledKernel: .asm holds its ttgir, ptx, cubin and sass)."""
    names = list(kernel.arg_names)
    missing = set(names) - set(signature) - set(constants)
    if missing:
        raise ValueError(f"no signature for {sorted(missing)}")
    full = {name: signature.get(name, "constexpr") for name in names}
    values = {name: (triton.language.bfloat16 if value == "bf16" else value) for name, value in constants.items()}
    attrs = {
        (names.index(name),): [["tt.divisibility", 16]]
        for name, kind in signature.items()
        if kind.startswith("*") or name in DIVISIBLE
    }
    source = ASTSource(kernel, full, {(names.index(n),): v for n, v in values.items()}, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def main() -> int:
    failed = 0
    for name, kernel, signature, constants, options in CASES:
        try:
            compile_sm90(kernel, signature, constants, options)
            print(f"ok      {name}")
        except Exception as error:  # every failure is reported, then the exit code says so
            failed += 1
            root = error
            while root.__cause__ is not None:  # a compilation error wraps the nested functions' ones
                root = root.__cause__
            where = str(error).strip().splitlines()[0]  # "at LINE:COLUMN:" for a compilation error
            print(f"FAILED  {name}: {where} {type(root).__name__}: {root}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
