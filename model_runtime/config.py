"""The model configuration: one validated dataclass for every supported MoE architecture, built from config.json.

Field names follow Hugging Face (`hidden_size`, `num_experts`, ...) so code that knows HF configs reads it as-is.
Every option the four architectures use is honoured; an option that would change the math and is not implemented
raises `UnsupportedConfigError` naming it instead of being ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

SUPPORTED_MODEL_TYPES = ("qwen3_moe", "qwen2_moe", "mixtral", "olmoe")
SUPPORTED_ROPE_TYPES = ("default", "linear", "yarn")
# transformers' defaults for (rms_norm_eps, rope_theta), used when a config.json leaves them out
_DEFAULT_EPS_AND_THETA = {
    "qwen3_moe": (1e-6, 1e4),
    "qwen2_moe": (1e-6, 1e4),
    "mixtral": (1e-5, 1e6),
    "olmoe": (1e-5, 1e4),
}


class UnsupportedConfigError(ValueError):
    """config.json names an architecture or an option this runtime does not implement."""


@dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling ("linear" or "yarn"; plain RoPE is `rope_scaling=None`)."""

    rope_type: Literal["linear", "yarn"]
    factor: float
    original_max_position_embeddings: int | None = None  # yarn: the pretraining context length
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None  # yarn: cos/sin scale; None derives it from factor (and mscale)
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        if self.rope_type not in ("linear", "yarn"):
            raise UnsupportedConfigError(f"rope scaling type {self.rope_type!r} is not supported")
        if not self.factor or self.factor <= 0:
            raise UnsupportedConfigError(
                f"rope scaling {self.rope_type!r} needs a positive 'factor', got {self.factor}"
            )
        if self.rope_type == "yarn" and not self.original_max_position_embeddings:
            raise UnsupportedConfigError("yarn rope scaling needs 'original_max_position_embeddings'")


@dataclass
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int  # dense MLP layers; also the expert size for mixtral and olmoe
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    num_experts: int
    num_experts_per_tok: int
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    moe_intermediate_size: int | None = None  # qwen expert size; None: experts use intermediate_size
    shared_expert_intermediate_size: int = 0  # qwen2_moe's always-on expert behind a sigmoid gate; 0: none
    norm_topk_prob: bool = False  # renormalise the top-k routing weights to sum to 1 (always on for mixtral)
    decoder_sparse_step: int = 1  # layer i is MoE when (i + 1) % step == 0 and i not in mlp_only_layers
    mlp_only_layers: list[int] = field(default_factory=list)
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_proj_bias: bool = False
    qk_norm: Literal["none", "per_head", "full"] = "none"  # qwen3_moe: per head; olmoe: over the whole projection
    clip_qkv: float | None = None  # olmoe: clamp q, k, v to [-clip, clip] after the projections
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        _check_model_type(self.model_type)
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "num_experts",
            "num_experts_per_tok",
            "head_dim",
            "decoder_sparse_step",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"config {name} must be a positive integer, got {getattr(self, name)!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(f"num_experts_per_tok {self.num_experts_per_tok} exceeds num_experts {self.num_experts}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")
        if bad_layers := [i for i in self.mlp_only_layers if not 0 <= i < self.num_hidden_layers]:
            raise ValueError(f"mlp_only_layers {bad_layers} are outside 0..{self.num_hidden_layers - 1}")
        if self.qk_norm not in ("none", "per_head", "full"):
            raise ValueError(f"qk_norm must be 'none', 'per_head' or 'full', got {self.qk_norm!r}")
        if self.qk_norm == "full" and self.head_dim * self.num_attention_heads != self.hidden_size:
            raise UnsupportedConfigError("olmoe q/k norms need head_dim * num_attention_heads == hidden_size")
        if self.shared_expert_intermediate_size < 0:
            raise ValueError("shared_expert_intermediate_size must be >= 0")

    @property
    def expert_intermediate_size(self) -> int:
        """Intermediate size of one routed expert, whatever the architecture calls it."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def moe_shape(self) -> tuple[int, int, int, int]:
        """(hidden, expert intermediate, experts, top_k): the shape of one MoE layer for the kernels."""
        return self.hidden_size, self.expert_intermediate_size, self.num_experts, self.num_experts_per_tok

    @property
    def context_length(self) -> int:
        """The most tokens one sequence may hold, as vLLM derives it: max_position_embeddings, or with RoPE scaling
        its factor times the length it scales (YaRN's original_max_position_embeddings: Qwen3 with YaRN 4x over
        32,768 -> 131,072, whatever max_position_embeddings says)."""
        scaling = self.rope_scaling
        if scaling is None:
            return self.max_position_embeddings
        scaled = scaling.original_max_position_embeddings if scaling.rope_type == "yarn" else None
        return int((scaled or self.max_position_embeddings) * scaling.factor)

    def is_moe_layer(self, layer: int) -> bool:
        return layer not in self.mlp_only_layers and (layer + 1) % self.decoder_sparse_step == 0

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        """Builds the config from a Hugging Face config.json dict (transformers 4.x and 5.x spellings)."""
        model_type = raw.get("model_type")
        _check_model_type(model_type)
        if raw.get("hidden_act", "silu") != "silu":
            raise UnsupportedConfigError(f"hidden_act {raw['hidden_act']!r} is not supported (only 'silu')")
        _reject_sliding_window(model_type, raw)
        default_eps, default_theta = _DEFAULT_EPS_AND_THETA[model_type]
        rope_theta, rope_scaling = _parse_rope(raw, default_theta)
        eos = raw.get("eos_token_id")
        common = dict(
            model_type=model_type,
            vocab_size=_required(raw, "vocab_size"),
            hidden_size=_required(raw, "hidden_size"),
            intermediate_size=_required(raw, "intermediate_size"),
            num_hidden_layers=_required(raw, "num_hidden_layers"),
            num_attention_heads=_required(raw, "num_attention_heads"),
            num_key_value_heads=raw.get("num_key_value_heads") or raw.get("num_attention_heads"),
            # transformers 5 writes qwen3_moe's count as num_local_experts, the Hub configs as num_experts
            num_experts=raw.get("num_experts") or _required(raw, "num_local_experts"),
            num_experts_per_tok=_required(raw, "num_experts_per_tok"),
            head_dim=raw.get("head_dim"),
            rms_norm_eps=raw.get("rms_norm_eps", default_eps),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=raw.get("max_position_embeddings", 32768),
            tie_word_embeddings=raw.get("tie_word_embeddings", False),
            bos_token_id=raw.get("bos_token_id"),
            eos_token_ids=[] if eos is None else [eos] if isinstance(eos, int) else list(eos),
            pad_token_id=raw.get("pad_token_id"),
        )
        if model_type in ("qwen3_moe", "qwen2_moe"):
            common.update(
                moe_intermediate_size=_required(raw, "moe_intermediate_size"),
                norm_topk_prob=raw.get("norm_topk_prob", False),
                decoder_sparse_step=raw.get("decoder_sparse_step", 1),
                mlp_only_layers=list(raw.get("mlp_only_layers") or []),
            )
        if model_type == "qwen3_moe":
            bias = raw.get("attention_bias", False)
            common.update(qkv_bias=bias, o_proj_bias=bias, qk_norm="per_head")
        elif model_type == "qwen2_moe":
            common.update(
                shared_expert_intermediate_size=raw.get("shared_expert_intermediate_size") or 0,
                qkv_bias=raw.get("qkv_bias", True),  # Qwen1.5-MoE checkpoints predate the flag and have the bias
            )
        elif model_type == "mixtral":
            common.update(norm_topk_prob=True)  # mixtral always renormalises its top-k weights
        elif model_type == "olmoe":
            bias = raw.get("attention_bias", False)
            common.update(
                norm_topk_prob=raw.get("norm_topk_prob", False),
                qkv_bias=bias,
                o_proj_bias=bias,
                qk_norm="full",
                clip_qkv=raw.get("clip_qkv"),
            )
        return cls(**common)

    @classmethod
    def from_pretrained(cls, model_dir: str | Path) -> ModelConfig:
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"no config.json in {model_dir}")
        return cls.from_dict(json.loads(path.read_text()))


def _check_model_type(model_type: str | None) -> None:
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedConfigError(
            f"model_type {model_type!r} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )


def _required(raw: dict[str, Any], key: str) -> Any:
    if key not in raw:
        raise ValueError(f"config.json for {raw.get('model_type')} lacks the required field {key!r}")
    return raw[key]


def _reject_sliding_window(model_type: str, raw: dict[str, Any]) -> None:
    # qwen configs carry a sliding_window value that only counts when use_sliding_window is true;
    # mixtral and olmoe apply sliding_window whenever it is set.
    if model_type in ("qwen3_moe", "qwen2_moe"):
        enabled = raw.get("use_sliding_window", False) or "sliding_attention" in (raw.get("layer_types") or [])
    else:
        enabled = raw.get("sliding_window") is not None
    if enabled:
        raise UnsupportedConfigError(
            f"sliding-window attention (sliding_window={raw.get('sliding_window')}) is not supported"
        )


def _parse_rope(raw: dict[str, Any], default_theta: float) -> tuple[float, RopeScaling | None]:
    # transformers 5 writes `rope_parameters` {rope_type, rope_theta, ...}; older configs `rope_theta` + `rope_scaling`
    params = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
    theta = params.pop("rope_theta", None) or raw.get("rope_theta") or default_theta
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    params.pop("type", None)
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedConfigError(
            f"rope scaling type {rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
        )
    partial = params.pop("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1.0):
        raise UnsupportedConfigError(f"partial_rotary_factor {partial} is not supported (only 1.0)")
    if rope_type == "default":
        return float(theta), None
    params = {key: value for key, value in params.items() if value is not None}  # null means "use the default"
    known = {f for f in RopeScaling.__dataclass_fields__ if f != "rope_type"}
    if unknown := sorted(set(params) - known):
        raise UnsupportedConfigError(f"rope scaling {rope_type!r} option(s) {unknown} are not supported")
    if rope_type == "yarn":
        params.setdefault("original_max_position_embeddings", raw.get("max_position_embeddings"))
    return float(theta), RopeScaling(rope_type=rope_type, **params)
