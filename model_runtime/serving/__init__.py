"""The serving engine: continuous batching over a paged KV cache with prefix caching (one engine per model).

request.py (what callers hold), sequence.py (a request inside the engine), block_manager.py (blocks, prefix cache),
scheduler.py (admission, prefill chunks, preemption), engine_core.py (the loop that owns the model), config.py,
kv_budget.py (the pool's size), row_sampling.py (a first token sampled after prefill, as the decode step would).
"""
