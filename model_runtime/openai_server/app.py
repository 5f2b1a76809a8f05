"""The FastAPI app: routes of the OpenAI-compatible API over one engine (docs/reference/model-server.md).

`create_app(engine, model_name, api_key, limits)` serves /health (no key needed; 503 once the engine has stopped
serving), /v1/models, /v1/completions and /v1/chat/completions; with an API key every /v1 route wants
`Authorization: Bearer KEY`. In front of the routes, RequestGuard checks Host, Origin and the key before any body is
read, and bounds the body; browser origins allowed with --allow-origin get CORS answers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response

from warpcode.model_runtime.openai_server.answer import answer_stream, chat_choice
from warpcode.model_runtime.openai_server.chat import chat_prompt_ids
from warpcode.model_runtime.openai_server.choices import Choices, collect
from warpcode.model_runtime.openai_server.echo import Echo
from warpcode.model_runtime.openai_server.errors import ApiError, install_error_handlers
from warpcode.model_runtime.openai_server.generation import ClientGone, completion_prompt_ids, engine_stopped
from warpcode.model_runtime.openai_server.guard import RequestGuard, RequestLimits
from warpcode.model_runtime.openai_server.logprobs import TokenText, completion_logprobs
from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest, CompletionRequest
from warpcode.model_runtime.openai_server.streaming import (
    EventStream,
    Reply,
    chat_chunks,
    completion_chunks,
    system_fingerprint,
)
from warpcode.model_runtime.openai_server.structured import request_grammar
from warpcode.model_runtime.openai_server.unsupported import CHAT_REFUSALS, COMPLETION_REFUSALS, refuse_unbuilt

# never delivered: the client has gone (nginx's "client closed request")
CLIENT_CLOSED = 499


def create_app(
    engine: Any, model_name: str, api_key: str | None = None, limits: RequestLimits | None = None
) -> FastAPI:
    limits = limits or RequestLimits()
    app = FastAPI(title="warpcode serve-model", docs_url=None, redoc_url=None, openapi_url=None)
    install_error_handlers(app)
    created = int(time.time())
    fingerprint = system_fingerprint(model_name, engine.context_length)

    def check_model(name: str | None) -> None:
        if name is not None and name != model_name:
            message = f"the model {name!r} does not exist: this server serves {model_name!r}"
            raise ApiError(404, message, "model", "model_not_found")

    def model_card() -> dict[str, Any]:
        card = {"id": model_name, "object": "model", "created": created, "owned_by": "warpcode"}
        return {**card, "max_model_len": engine.context_length}

    api = APIRouter(prefix="/v1")

    @app.get("/health", response_model=None)
    async def health() -> dict[str, str] | JSONResponse:
        if (stopped := engine_stopped(engine)) is not None:
            return JSONResponse({"status": "error", "message": stopped.message}, status_code=stopped.status)
        return {"status": "ok"}

    @api.get("/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @api.get("/models/{name:path}")
    async def model(name: str) -> dict[str, Any]:
        check_model(name)
        return model_card()

    @api.post("/completions", response_model=None)
    async def completions(body: CompletionRequest, request: Request) -> Any:
        check_model(body.model)
        refuse_unbuilt(body, COMPLETION_REFUSALS)
        # tokenising (and rendering a template) takes a while on long prompts: off the event loop, not to stall others
        prompts = body.prompts()
        prompt_ids = [await asyncio.to_thread(completion_prompt_ids, engine, prompt) for prompt in prompts]
        echoes = [Echo(body, prompt, ids, engine.tokenizer) for prompt, ids in zip(prompts, prompt_ids, strict=True)]
        wants_logprobs = body.logprobs is not None
        # one grammar for every prompt (only a chat prompt's open reasoning changes it); compiling takes a while too
        grammar = await asyncio.to_thread(request_grammar, engine, body, prompt_ids[0])
        # from here on, every way out ends the engine requests (EventStream, collect)
        choices = Choices(engine, prompt_ids, body, body.max_tokens, "prompt", grammar)
        reply = Reply("text_completion", model_name, fingerprint)
        if body.stream:
            chunks = completion_chunks(
                choices, reply, body.include_usage(), body.return_token_ids, echoes, wants_logprobs
            )
            return EventStream(choices, chunks)
        try:
            results = await collect(choices, request)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        answers = []
        for index, result in enumerate(results):
            echo = echoes[index // body.n]
            logprobs = None
            if wants_logprobs:
                ids, entries = result.token_ids, result.logprobs
                if echo.prompt_ids:
                    ids, entries = echo.prompt_ids + ids, choices.prompt_logprobs(index) + entries
                logprobs = completion_logprobs(echo.token_text, entries, ids)
            text = echo.text + result.text
            choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": result.finish_reason}
            if body.return_token_ids:
                choice["token_ids"] = result.token_ids
            answers.append(choice)
        return reply.wrap(answers, usage=choices.usage())

    @api.post("/chat/completions", response_model=None)
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
        check_model(body.model)
        refuse_unbuilt(body, CHAT_REFUSALS)
        prompt_ids = await asyncio.to_thread(chat_prompt_ids, engine.tokenizer, body)
        answers = [answer_stream(engine.tokenizer, prompt_ids, body) for _ in range(body.n)]
        grammar = await asyncio.to_thread(request_grammar, engine, body, prompt_ids)  # compiling takes a while too
        # from here on, every way out ends the engine requests (EventStream, collect)
        choices = Choices(engine, [prompt_ids], body, body.completion_limit(), "messages", grammar)
        token_text = TokenText(engine.tokenizer) if body.logprobs else None
        if body.stream:
            reply = Reply("chat.completion.chunk", model_name, fingerprint)
            chunks = chat_chunks(choices, reply, body.include_usage(), body.return_token_ids, answers, token_text)
            return EventStream(choices, chunks)
        try:
            results = await collect(choices, request)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        replies = [chat_choice(index, result, answers[index], body, token_text) for index, result in enumerate(results)]
        return Reply("chat.completion", model_name, fingerprint).wrap(replies, usage=choices.usage())

    app.include_router(api)
    if limits.allowed_origins:  # what a browser needs to read the answers (and to send a key) from those origins
        app.add_middleware(
            CORSMiddleware,
            allow_origins=sorted(limits.allowed_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    app.add_middleware(RequestGuard, api_key=api_key, limits=limits)
    return app
