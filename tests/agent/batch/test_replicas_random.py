"""Generation-driven scripted jobs: `"generate_tokens"` turns against a real model server of random weights (no
tokenizer), checked token for token against the engine itself; their usage in the batch's rows; `random:PRESET`
specs; and `python -m warpcode.bench.batch_replicas` end to end with `--replicas 1,2` on a real local Ray instance."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.agent.batch.calc_project import make_project
from tests.agent.batch.job_files import read_rows, write_jobs
from tests.agent.scripted_model import write_script
from tests.model_runtime.openai_server.servers import RANDOM_MODEL, serving, start_model_server, stop
from warpcode.agent.backends import BackendError, backend_from_spec
from warpcode.agent.backends.base import Finish, ToolCallReady
from warpcode.agent.backends.scripted import SESSION_TAG_TOKENS, ScriptedBackend
from warpcode.agent.batch.driver import run_batch
from warpcode.agent.batch.runner import Options
from warpcode.model_runtime.chat.messages import Message


@pytest.fixture(scope="module")
def random_engine():
    from warpcode.model_runtime import load_random

    engine = load_random("tiny", device="cpu")
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def random_url(random_engine):
    with serving(random_engine, RANDOM_MODEL) as url:
        yield url


def greedy(engine, prompt: list[int], count: int, stop_ids=()) -> list[int]:
    """The engine's own greedy tokens for the prompt, outside the server (the independent reference)."""
    from warpcode.model_runtime import SamplingParams

    handle = engine.submit(prompt, count, SamplingParams(temperature=0.0), stop_token_ids=stop_ids)
    return [token for output in handle for token in output.token_ids]


async def replay(backend: ScriptedBackend, messages: list[Message]) -> list:
    return [event async for event in backend.stream(messages, [])]


def test_generate_tokens_turns_run_on_the_server_and_reuse_the_session_prefix(random_engine, random_url):
    read = {"name": "read_file", "arguments": {"path": "a.py"}}
    backend = ScriptedBackend(
        [{"generate_tokens": 5, "prompt_tokens": 100, "tool_calls": [read]}, {"generate_tokens": 4, "text": "done"}],
        model_server=f"openai:{random_url}#{RANDOM_MODEL}",
    )
    messages = [Message("system", "You are a coding agent. " * 8), Message("user", "fix a.py")]
    first = asyncio.run(replay(backend, messages))
    assert isinstance(first[0], ToolCallReady) and first[0].call.name == "read_file"
    assert isinstance(first[-1], Finish) and first[-1].reason == "tool_calls"
    context = backend._context_ids
    added = "".join(m.content for m in messages).encode()[:100]
    prompt_1 = context[:SESSION_TAG_TOKENS] + list(added)
    assert context[: len(prompt_1)] == prompt_1
    assert context[len(prompt_1) :] == greedy(random_engine, prompt_1, 5)

    messages += [Message("assistant", "", [first[0].call]), Message("tool", "x = 1\n" * 3, tool_call_id="c", name="r")]
    second = asyncio.run(replay(backend, messages))
    assert isinstance(second[-1], Finish) and second[-1].reason == "stop"
    prompt_2 = prompt_1 + greedy(random_engine, prompt_1, 5) + list(b"x = 1\n" * 3)
    assert backend._context_ids == prompt_2 + greedy(random_engine, prompt_2, 4)

    turn_1, turn_2 = backend.generation
    assert (turn_1["prompt_tokens"], turn_1["cached_tokens"], turn_1["generated_tokens"]) == (len(prompt_1), 0, 5)
    assert (turn_2["prompt_tokens"], turn_2["generated_tokens"]) == (len(prompt_2), 4)
    # the session's first request is cached to its last generated token (whose keys were never written): only the
    # new part is computed
    assert turn_2["cached_tokens"] == len(prompt_1) + 5 - 1
    assert turn_1["model"] == turn_2["model"] == RANDOM_MODEL
    assert turn_1["started"] <= turn_1["ended"] <= turn_2["started"] <= turn_2["ended"]


def test_ignore_eos_generates_past_the_end_of_sequence_token(random_engine):
    from warpcode.model_runtime import get_preset, load_random

    prompt = [7, 8, 9, 10]
    config = get_preset("tiny")
    config.eos_token_ids = greedy(random_engine, prompt, 1)  # the weights' first greedy token ends the sequence
    engine = load_random(config, device="cpu")  # the same seed: the same weights as random_engine
    try:
        with serving(engine, RANDOM_MODEL) as url:
            body = {"prompt": prompt, "max_tokens": 6, "temperature": 0, "return_token_ids": True}
            stopped = httpx.post(f"{url}/completions", json=body, timeout=60).json()["choices"][0]
            ignored = httpx.post(f"{url}/completions", json={**body, "ignore_eos": True}, timeout=60).json()
    finally:
        engine.shutdown()
    assert stopped["token_ids"] == config.eos_token_ids and stopped["finish_reason"] == "stop"
    assert ignored["choices"][0]["token_ids"] == greedy(random_engine, prompt, 6)
    assert ignored["usage"]["completion_tokens"] == 6 and ignored["choices"][0]["finish_reason"] == "length"


def test_random_specs_and_missing_servers_are_clear_errors(tmp_path: Path):
    from warpcode.agent.batch.replicas import replica_model

    with pytest.raises(BackendError, match=r"'random:tiny' .* has no tokenizer"):
        backend_from_spec("random:tiny")
    assert replica_model("random:qwen3-30b-a3b").preset == "qwen3-30b-a3b"
    assert replica_model("random:tiny").name == "random:tiny"
    assert replica_model("random:tiny#mxfp8").weights == "mxfp8"
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    mx_checkpoint = replica_model(f"local:{tmp_path / 'ckpt'}#mxfp8")
    assert (mx_checkpoint.checkpoint, mx_checkpoint.weights) == (tmp_path / "ckpt", "mxfp8")
    sized = replica_model(f"local:{tmp_path / 'ckpt'}#mxfp8,context=8192")
    assert (sized.weights, sized.context, sized.name) == ("mxfp8", 8192, "ckpt#mxfp8,context=8192")
    plain = replica_model(f"local:{tmp_path / 'ckpt'}#speculative=off")
    assert (plain.speculative, plain.name) == ("off", "ckpt#speculative=off")
    with pytest.raises(BackendError, match="unknown option #fp4"):
        replica_model(f"local:{tmp_path / 'ckpt'}#fp4")
    with pytest.raises(ValueError, match="--replicas serves a local:DIR or random:PRESET model"):
        replica_model("random:")
    backend = ScriptedBackend([{"generate_tokens": 3}])
    with pytest.raises(BackendError, match="no model server was given"):
        asyncio.run(replay(backend, [Message("user", "hi")]))
    backend = ScriptedBackend([{"generate_tokens": 0}], model_server="openai:http://127.0.0.1:9/v1")
    with pytest.raises(BackendError, match="positive integers"):
        asyncio.run(replay(backend, [Message("user", "hi")]))


def test_the_batch_records_each_jobs_generation_in_its_usage(tmp_path: Path, random_url):
    make_project(tmp_path / "repo", git_repo=True)
    turns = [{"generate_tokens": 3, "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
             {"generate_tokens": 2, "text": "done"}]  # fmt: skip
    script = write_script(tmp_path / "generate.json", turns)
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "gen", "repo": "repo", "instruction": "look", "model": f"scripted:{script}"},
        {"id": "plain", "repo": "repo", "instruction": "look",
         "model": f"scripted:{write_script(tmp_path / 'plain.json', [{'text': 'ok'}])}"},
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    options = Options(model_server=f"openai:{random_url}")
    assert asyncio.run(run_batch(jobs, out, options)).exit_code == 0
    rows = {row["id"]: row for row in read_rows(out)}
    assert rows["gen"]["status"] == "succeeded", rows["gen"]
    usage = rows["gen"]["usage"]
    assert usage["generated_tokens"] == 5 and [r["generated_tokens"] for r in usage["generation"]] == [3, 2]
    assert usage["model_requests"] == 2 and usage["generation"][1]["cached_tokens"] > 0
    assert set(rows["plain"]["usage"]) == {"input_tokens", "output_tokens", "model_requests"}  # as before


@pytest.mark.slow
def test_serve_model_takes_the_random_spec_of_the_replicas(random_engine):
    process, url = start_model_server("--model", "random:tiny", "--warm-up", "0,0")
    try:
        body = {"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "return_token_ids": True}
        reply = httpx.post(f"{url}/completions", json=body, timeout=60).json()
    finally:
        assert stop(process) == 0
    assert reply["model"] == "tiny"
    assert reply["choices"][0]["token_ids"] == greedy(random_engine, [1, 2, 3], 4)  # the same seed, the same weights


@pytest.mark.usefixtures("one_ray_instance_at_a_time")
@pytest.mark.slow
def test_bench_batch_replicas_on_a_local_ray_instance(tmp_path: Path):
    pytest.importorskip("ray")
    results = tmp_path / "bench.json"
    command = [sys.executable, "-m", "warpcode.bench.batch_replicas", "--model", "random:tiny", "--jobs", "4",
               "--repos", "2", "--turns", "2", "--tokens", "6", "--replicas", "1,2",
               "--replica-gpus", "0.5", "--json", str(results)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(results.read_text())
    one, two = report["runs"]
    for run, spread in ((one, {"0": 4}), (two, {"0": 2, "1": 2})):
        assert run["statuses"] == {"succeeded": 4}
        assert run["sessions_per_replica"] == spread
        assert run["generated_tokens"] == 4 * 2 * 6 and run["tokens_per_s"] > 0
        (_, first_cached), (_, second_cached) = run["per_turn_mean_prompt_cached"]
        assert first_cached == 0 and second_cached > 0  # each session's second turn found its first one cached
        assert len(run["summary"]) == run["replicas"]
    assert report["ratio"] == pytest.approx(two["tokens_per_s"] / one["tokens_per_s"], rel=1e-2)
    assert "--replicas 2 / --replicas 1:" in done.stdout
