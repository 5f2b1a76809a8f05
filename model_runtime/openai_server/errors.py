"""Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, for every failure the API reports:
bad requests (400, including FastAPI's validation errors and malformed JSON), keys (401), unknown models and
routes (404), and the unexpected (500)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"  # OpenAI's types, 401 and 404 too
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param, code)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def from_validation(error: RequestValidationError) -> ApiError:
    """The first problem pydantic found, named by its JSON path (`messages[0].role`) as OpenAI's `param`."""
    first = error.errors()[0]
    location = [part for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "")
        return bad_request(f"the request body is not valid JSON: {reason}".rstrip(": "), code="invalid_json")
    param = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".") or None
    if param is None:
        return bad_request("the request body must be a JSON object", code="invalid_request")
    message = first.get("msg", "invalid value").removeprefix("Value error, ")
    return bad_request(f"{param}: {message}", param, "invalid_value")


async def _api_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return JSONResponse(error.body(), status_code=error.status)


async def _invalid_request(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    return await _api_error(request, from_validation(error))


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    # Starlette's own 404 (no such route) and 405 (wrong method), in OpenAI's shape like everything else
    assert isinstance(error, HTTPException)
    code = str(error.detail).lower().replace(" ", "_")  # "not_found", "method_not_allowed"
    return await _api_error(
        request, ApiError(error.status_code, f"{request.method} {request.url.path}: {error.detail}", code=code)
    )


def internal_error(error: Exception) -> ApiError:
    return ApiError(500, f"internal error: {type(error).__name__}: {error}", code="internal_error")


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    # Starlette logs the traceback after this response; the client hears only that it was the server's fault.
    return await _api_error(request, internal_error(error))
