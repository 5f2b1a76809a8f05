"""GPU probe of the serving engine's logits processing (logprobs, logit_bias, penalties) with CUDA graphs on:
requests that ask for it decode in eager steps beside graph-replayed plain ones. Prints one JSON line per check.

    python3 experiments/probe_logits_processing_gpu.py [--preset tiny]
"""

from __future__ import annotations

import argparse
import json
import threading
from collections import Counter

import torch

from warpcode.model_runtime import load_random
from warpcode.model_runtime.serving.logits_processors import LogitsProcessing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="tiny")
    args = parser.parse_args()
    engine = load_random(args.preset, device="cuda" if torch.cuda.is_available() else "cpu")
    prompt = list(range(3, 40))
    plain_alone = engine.generate(prompt, 16, stop_token_ids=[])
    forced = next(t for t in range(5, 1000) if t not in plain_alone)
    requests = {
        "plain": LogitsProcessing(),
        "logprobs": LogitsProcessing(logprobs=5, prompt_logprobs=2),
        "bias": LogitsProcessing(logit_bias=((forced, 100.0),)),
        "penalties": LogitsProcessing(presence_penalty=1.5, frequency_penalty=0.5),
    }
    results: dict[str, tuple[list[int], list]] = {}

    def run(name: str) -> None:
        handle = engine.submit(prompt, 16, None, 0, [], (), requests[name])
        outputs = list(handle)
        results[name] = (handle.token_ids, [lp for o in outputs for lp in o.logprobs or []], handle.prompt_logprobs)

    threads = [threading.Thread(target=run, args=(name,)) for name in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = {"graphs": engine.core.runner.use_graphs, "preset": args.preset}
    report["plain_unchanged"] = results["plain"][0] == plain_alone
    report["bias_forces"] = results["bias"][0] == [forced] * 16
    ids, lps, prompt_lps = results["logprobs"]
    reference = torch.log_softmax(engine.logits(prompt + ids)[0].float(), dim=-1)
    rows = reference[len(prompt) - 1 : -1]
    errors = [abs(lp.logprob - rows[i, t].item()) for i, (t, lp) in enumerate(zip(ids, lps, strict=True))]
    report["logprob_max_error"] = max(errors)
    report["prompt_logprob_max_error"] = max(
        abs(lp.logprob - reference[i - 1, prompt[i]].item()) for i, lp in enumerate(prompt_lps) if lp is not None
    )
    report["logprobs_same_tokens_as_plain"] = ids == plain_alone
    ids = results["penalties"][0]
    reference = engine.logits(prompt + ids)[0].float()[len(prompt) - 1 : -1]
    worst = 0.0
    for step, token in enumerate(ids):
        changed = reference[step].clone()
        for seen, count in Counter(ids[:step]).items():
            changed[seen] -= 1.5 + 0.5 * count
        worst = max(worst, (changed.max() - changed[token]).item())
    report["penalty_worst_gap"] = worst
    report["penalised_differs"] = ids != plain_alone
    print(json.dumps(report))
    engine.shutdown()


if __name__ == "__main__":
    main()
