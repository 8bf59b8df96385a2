"""Request validation of the fake server: a strict, correct reading of the OpenAI contract."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ROLES = ("developer", "system", "user", "assistant", "tool")
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ApiError(Exception):
    """An error answer in the OpenAI envelope."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def body(self) -> dict[str, Any]:
        """The OpenAI error envelope."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def _bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_common(body: Mapping[str, Any], served: tuple[str, ...]) -> None:
    """Checks shared by chat and legacy completions."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required and must be a string", "model")
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and body[key] is not None and (not _is_int(body[key]) or body[key] < 1):
            raise _bad(f"'{key}' must be an integer >= 1", key)
    check_sampling(body)
    n = body.get("n")
    if n is not None and (not _is_int(n) or not 1 <= n <= 128):
        raise _bad("'n' must be an integer in [1, 128]", "n")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not -(2**63) <= seed <= INT64_MAX):
        raise _bad("'seed' must be a 64-bit integer", "seed")
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if (not isinstance(stops, list) or not 1 <= len(stops) <= 4
                or not all(isinstance(s, str) and s for s in stops)):
            raise _bad("'stop' must be a non-empty string or a list of 1 to 4 of them", "stop")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise _bad("'stream' must be a boolean", "stream")
    opts = body.get("stream_options")
    if opts is not None and not isinstance(opts, Mapping):
        raise _bad("'stream_options' must be an object", "stream_options")
    if model not in served:
        raise ApiError(404, f"The model '{model}' does not exist", param="model",
                       code="model_not_found")


def check_chat(body: Mapping[str, Any], served: tuple[str, ...]) -> None:
    """Validate a chat completion request; raise ApiError on the first problem."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array", "messages")
    for i, msg in enumerate(messages):
        _check_message(i, msg)
    check_common(body, served)
    logprobs = body.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, bool):
        raise _bad("'logprobs' must be a boolean", "logprobs")
    top = body.get("top_logprobs")
    if top is not None:
        if not _is_int(top) or not 0 <= top <= 20:
            raise _bad("'top_logprobs' must be an integer in [0, 20]", "top_logprobs")
        if not logprobs:
            raise _bad("'top_logprobs' requires 'logprobs' to be true", "top_logprobs")
    _check_response_format(body.get("response_format"))
    _check_tools(body.get("tools"), body.get("tool_choice"))


def _check_message(i: int, msg: object) -> None:
    param = f"messages[{i}]"
    if not isinstance(msg, Mapping):
        raise _bad(f"{param} must be an object", param)
    role = msg.get("role")
    if role not in ROLES:
        raise _bad(f"{param}.role must be one of {', '.join(ROLES)}", f"{param}.role")
    content = msg.get("content")
    if role == "assistant" and content is None and msg.get("tool_calls"):
        return
    if isinstance(content, list):
        if not all(isinstance(p, Mapping) and p.get("type") == "text"
                   and isinstance(p.get("text"), str) for p in content):
            raise _bad(f"{param}.content parts must be text parts", f"{param}.content")
    elif not isinstance(content, str):
        raise _bad(f"{param}.content must be a string or an array of parts", f"{param}.content")
    if role == "tool" and not isinstance(msg.get("tool_call_id"), str):
        raise _bad(f"{param}: a tool message needs 'tool_call_id'", f"{param}.tool_call_id")


def _check_response_format(fmt: object) -> None:
    if fmt is None:
        return
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise _bad("'response_format.type' must be text, json_object or json_schema",
                   "response_format")
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if (not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str)
                or not isinstance(spec.get("schema", {}), Mapping)):
            raise _bad("'response_format.json_schema' needs a name and a schema object",
                       "response_format.json_schema")


def _check_tools(tools: object, choice: object) -> None:
    names: list[str] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("'tools' must be an array", "tools")
        for i, tool in enumerate(tools):
            fn = tool.get("function") if isinstance(tool, Mapping) else None
            if (not isinstance(tool, Mapping) or tool.get("type") != "function"
                    or not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str)
                    or not fn["name"]):
                raise _bad(f"tools[{i}] must be {{type: function, function: {{name, ...}}}}",
                           f"tools[{i}]")
            params = fn.get("parameters")
            if params is not None and (not isinstance(params, Mapping)
                                       or params.get("type", "object") != "object"):
                raise _bad(f"tools[{i}].function.parameters must be an object schema",
                           f"tools[{i}].function.parameters")
            names.append(fn["name"])
    if choice is None:
        return
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise _bad("'tool_choice' must be none, auto, required or a named function",
                       "tool_choice")
        if choice == "required" and not names:
            raise _bad("tool_choice 'required' needs tools", "tool_choice")
        return
    fn = choice.get("function") if isinstance(choice, Mapping) else None
    if not isinstance(fn, Mapping) or fn.get("name") not in names:
        raise _bad("'tool_choice' names a function that is not in 'tools'", "tool_choice")


def check_embeddings(body: Mapping[str, Any], served: tuple[str, ...]) -> list[str]:
    """Validate an embeddings request; return the inputs as strings."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required", "model")
    raw = body.get("input")
    items: list[Any] = raw if isinstance(raw, list) else [raw]
    if not items or raw is None:
        raise _bad("'input' must be a non-empty string or array", "input")
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and item:
            out.append(item)
        elif _is_int(item):
            out.append(str(item))
        elif isinstance(item, list) and item and all(_is_int(t) for t in item):
            out.append(" ".join(str(t) for t in item))
        else:
            raise _bad("'input' items must be non-empty strings or token arrays", "input")
    if body.get("encoding_format", "float") not in ("float", "base64"):
        raise _bad("'encoding_format' must be float or base64", "encoding_format")
    dims = body.get("dimensions")
    if dims is not None and (not _is_int(dims) or dims < 1):
        raise _bad("'dimensions' must be an integer >= 1", "dimensions")
    if model not in served:
        raise ApiError(404, f"The model '{model}' does not exist", param="model",
                       code="model_not_found")
    return out


def check_sampling(body: Mapping[str, Any]) -> None:
    """`temperature` in [0, 2] and `top_p` in [0, 1], as numbers, when given."""
    temp = body.get("temperature")
    if temp is not None and (not _is_num(temp) or not 0 <= temp <= 2):
        raise _bad("'temperature' must be a number in [0, 2]", "temperature")
    top_p = body.get("top_p")
    if top_p is not None and (not _is_num(top_p) or not 0 <= top_p <= 1):
        raise _bad("'top_p' must be a number in [0, 1]", "top_p")
