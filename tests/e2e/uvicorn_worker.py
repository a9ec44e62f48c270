"""A real OpenAI-compatible worker stack for kvgate's end-to-end tests.

FastAPI on uvicorn, as vLLM, SGLang and trtllm-serve run, with a pydantic
request model shaped like theirs (a kv_hints member the model reads), and
uvicorn's defaults where the worker's HTTP behaviour matters: the 5 s
keep-alive timeout, and either of its HTTP/1.1 implementations.

    python uvicorn_worker.py --port 8000 --http h11|httptools

Only the GPU is fake: a completion is a fixed text, streamed token by
token for "stream": true. X-Kvgate-Delay (seconds) holds the answer back,
X-Kvgate-Token-Delay spaces the streamed tokens (default 0.01 s), so that
a test can leave before or in the middle of an answer. Every request that carries X-Kvgate-Case is kept
(its body bytes and what the model read as kv_hints) and served back by
GET /_kvgate/records?case=..., so that a test asks the worker itself what
reached it.
"""

import argparse
import asyncio
import base64
import json
from typing import Any, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

CASE_HEADER = "x-kvgate-case"


class NvExt(BaseModel):
    # Dynamo's nvext extension: the members that pick a worker, and one a
    # client may send.
    model_config = ConfigDict(extra="allow")

    backend_instance_id: Optional[Any] = None
    decode_worker_id: Optional[Any] = None
    prefill_worker_id: Optional[Any] = None
    dp_rank: Optional[Any] = None
    prefill_dp_rank: Optional[Any] = None
    token_data: Optional[Any] = None
    use_raw_prompt: Optional[Any] = None
    ignore_eos: Optional[bool] = None


# The router-only members the engines' request models declare (vLLM,
# SGLang, TensorRT-LLM), read by the model as the engines read them.
ROUTER_ONLY = ["kv_transfer_params", "ec_transfer_params", "bootstrap_host", "bootstrap_port", "bootstrap_room",
               "bootstrap_pair_key", "decode_tp_size", "routed_dp_rank", "disagg_prefill_dp_rank", "data_parallel_rank",
               "kv_router_hint", "disaggregated_params", "prompt_token_ids", "prompt_token_ids_b64"]
NVEXT_ROUTER_ONLY = ["backend_instance_id", "decode_worker_id", "prefill_worker_id", "dp_rank", "prefill_dp_rank",
                     "token_data", "use_raw_prompt"]


class ChatCompletionRequest(BaseModel):
    # vLLM's and TensorRT-LLM's request models accept members they do not
    # name, as OpenAI's API does.
    model_config = ConfigDict(extra="allow")

    model: str = "m"
    messages: list[dict[str, Any]] = []
    stream: bool = False
    max_tokens: Optional[int] = None
    kv_hints: Optional[Any] = None
    kv_transfer_params: Optional[dict[str, Any]] = None
    ec_transfer_params: Optional[dict[str, Any]] = None
    bootstrap_host: Optional[Any] = None
    bootstrap_port: Optional[Any] = None
    bootstrap_room: Optional[Any] = None
    routed_dp_rank: Optional[Any] = None
    disagg_prefill_dp_rank: Optional[Any] = None
    data_parallel_rank: Optional[Any] = None
    bootstrap_pair_key: Optional[Any] = None
    decode_tp_size: Optional[Any] = None
    kv_router_hint: Optional[Any] = None
    disaggregated_params: Optional[dict[str, Any]] = None
    prompt_token_ids: Optional[list[int]] = None
    prompt_token_ids_b64: Optional[str] = None
    nvext: Optional[NvExt] = None


def router_only_read(model: ChatCompletionRequest) -> dict[str, Any]:
    """The router-only fields the model read, by path: what kvgate must
    never let an untrusted client set."""
    out = {f: getattr(model, f) for f in ROUTER_ONLY if getattr(model, f) is not None}
    if model.nvext is not None:
        for f in NVEXT_ROUTER_ONLY:
            if getattr(model.nvext, f) is not None:
                out["nvext." + f] = getattr(model.nvext, f)
    return out


app = FastAPI()
records: dict[str, list[dict[str, Any]]] = {}
total = 0


def keep(request: Request, body: bytes, model: Optional[ChatCompletionRequest]) -> None:
    global total
    total += 1
    case = request.headers.get(CASE_HEADER)
    if case is None:
        return
    records.setdefault(case, []).append(
        {
            "body": base64.b64encode(body).decode(),
            "kv_hints": None if model is None else model.kv_hints,
            "router_only": None if model is None else router_only_read(model),
            "model": None if model is None else model.model,
            "messages": None if model is None else model.messages,
            "nvext": None if model is None or model.nvext is None else model.nvext.model_dump(exclude_none=True),
            "header_list": [[k, v] for k, v in request.headers.items()],
            "expect": request.headers.get("expect"),
            "headers": {k: v for k, v in request.headers.items()},
        }
    )


TOKENS = ["Hello", " from", " the", " worker", "."]


def completion(stream: bool, token_delay: float):
    if not stream:
        return JSONResponse(
            {
                "id": "chatcmpl-kvgate",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(TOKENS)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": len(TOKENS), "total_tokens": 1 + len(TOKENS)},
            }
        )

    async def events():
        for tok in TOKENS:
            chunk = {
                "id": "chatcmpl-kvgate",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": tok}, "finish_reason": None}],
            }
            yield "data: " + json.dumps(chunk) + "\n\n"
            await asyncio.sleep(token_delay)
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@app.post("/v1/chat/completions")
async def chat(request: Request):
    body = await request.body()
    try:
        model = ChatCompletionRequest.model_validate_json(body)
    except Exception as exc:  # the worker's own 400, as vLLM's
        keep(request, body, None)
        return JSONResponse(
            {"error": {"message": "invalid request: " + type(exc).__name__, "type": "invalid_request_error", "code": 400}},
            status_code=400,
        )
    keep(request, body, model)
    delay = float(request.headers.get("x-kvgate-delay", "0"))
    if delay > 0:
        await asyncio.sleep(delay)
    return completion(model.stream, float(request.headers.get("x-kvgate-token-delay", "0.01")))


@app.get("/_kvgate/records")
async def get_records(case: str):
    return JSONResponse(records.get(case, []))


@app.get("/_kvgate/count")
async def get_count():
    return JSONResponse({"total": total})


@app.get("/health")
async def health():
    return JSONResponse({"ok": True})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--http", choices=["h11", "httptools"], default="h11")
    args = p.parse_args()
    # uvicorn's defaults otherwise (timeout_keep_alive=5), as a worker runs.
    uvicorn.run(app, host="127.0.0.1", port=args.port, http=args.http, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
