"""How big the built-in model's vocabulary should be: BPEs of several sizes (warpcode.training.tokenizer) trained on
a sample of the permissive training code of some site-packages folders, each measured on code it never saw (the
held-out packages, and training files outside its sample) in bytes per token, and on the agent's real prompt (its
system prompt and tool schemas through our chat template, a short tool-calling conversation) in tokens, beside what
the tied embedding costs on disk (vocab x hidden 256 x 2 bytes, of the 32 MB budget).

Run: python experiments/builtin_vocab.py --site-packages DIR [DIR...] [--sizes 4096,8192,...] [--sample-every 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from warpcode.agent.prompt import system_prompt
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import template_message
from warpcode.model_runtime.chat.template import render_chat_template
from warpcode.tools import Workspace
from warpcode.training.corpus import find_packages, split_documents
from warpcode.training.model_config import BUILTIN
from warpcode.training.tokenizer import CHAT_TEMPLATE, train_tokenizer


def agent_prompt(root: Path) -> str:
    messages = [
        Message("system", system_prompt(Workspace(root), "ask")),
        Message("user", "The parser drops empty fields; fix parse() in src/parse.py and run its tests."),
        Message("assistant", "", [ToolCall("c1", "read_file", {"path": "src/parse.py"})]),
        Message("tool", "1 def parse(text):\n2     return [int(x) for x in text.split(',')]\n", tool_call_id="c1"),
        Message("assistant", "", [ToolCall("c2", "edit_file", {"path": "src/parse.py",
                "old_text": "for x in text.split(',')]", "new_text": "for x in text.split(',') if x.strip()]"})]),
        Message("tool", "Edited src/parse.py", tool_call_id="c2"),
        Message("assistant", "parse() now skips empty fields."),
    ]  # fmt: skip
    return render_chat_template(CHAT_TEMPLATE, [template_message(m) for m in messages], tool_schemas(), True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-packages", type=Path, nargs="+", required=True)
    parser.add_argument("--sizes", default="4096,8192,12288,16384,24576,32768")
    parser.add_argument("--sample-every", type=int, default=4, help="train on every Nth training document")
    args = parser.parse_args()
    documents = split_documents(find_packages(args.site_packages))
    sample = documents.train[:: args.sample_every]
    unseen = documents.train[1 :: args.sample_every * 10]  # never in the sample
    prompt = agent_prompt(Path.cwd())
    megabytes = {name: round(sum(map(len, texts)) / 1e6, 1) for name, texts in
                 (("sample_mb", sample), ("unseen_mb", unseen), ("heldout_mb", documents.heldout))}  # fmt: skip
    print(json.dumps({**megabytes, "agent_prompt_chars": len(prompt)}), flush=True)
    for size in map(int, args.sizes.split(",")):
        started = time.monotonic()
        tokenizer = train_tokenizer(sample, size)
        seconds = time.monotonic() - started

        def bytes_per_token(texts: list[str], tokenizer=tokenizer) -> float:
            tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
            return round(sum(len(t.encode()) for t in texts) / tokens, 3)

        print(json.dumps({"vocab": size, "train_s": round(seconds, 1),
                          "unseen_bytes_per_token": bytes_per_token(unseen),
                          "heldout_bytes_per_token": bytes_per_token(documents.heldout),
                          "agent_prompt_tokens": len(tokenizer.encode(prompt).ids),
                          "embedding_mb": round(size * BUILTIN.hidden_size * 2 / 1e6, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
