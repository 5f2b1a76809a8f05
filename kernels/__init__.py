"""warpcode.kernels: MoE routing and expert kernels (Triton) with a plain-PyTorch reference for each.

Fixed API (docs/architecture.md, the kernels):
    topk_weights, topk_ids = route(router_logits, k, normalize=True)   # [T, E] -> fp32 [T, K], int64 [T, K]
    out = moe_warp_decode(x, topk_weights, topk_ids, w13, w2)          # x [T, H] -> [T, H] in x.dtype
    out = moe_expert_centric(...), moe_reference(...)                  # same arguments
    out = moe(...)                                                     # dispatcher used by the model runtime
    uses_warp_decode(x, w13, top_k)                                    # whether moe(...) can add a residual
    mx = quantize_mxfp8(w); w_hat = dequantize_mxfp8(mx)               # MXFP8 weights (docs/reference/mxfp8.md)
"""

from warpcode.kernels.dispatch import moe, route, uses_warp_decode
from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.moe_reference import moe_reference, route_reference
from warpcode.kernels.mx import MXTensor, dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.route import route_triton
from warpcode.kernels.warp_decode import moe_warp_decode

__all__ = [
    "MXTensor",
    "dequantize_mxfp8",
    "moe",
    "moe_expert_centric",
    "moe_reference",
    "moe_warp_decode",
    "quantize_mxfp8",
    "route",
    "route_reference",
    "route_triton",
    "uses_warp_decode",
]
