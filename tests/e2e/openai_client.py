#!/usr/bin/env python3
"""Sends OpenAI requests with kv_hints through kvgate using the official client.

  openai_client.py --target NAME=BASE_URL [--target ...]

For every target it calls chat.completions, completions and responses, each
with stream=False and stream=True, passing extra_body={"kv_hints": ENVELOPE}
(the reference envelope of docs/spec.md, serialised by the client) and an
X-Kvgate-Case header "NAME/API/stream|plain" so the recording worker can file
what arrived. It checks that the client parsed each answer, and prints one
JSON line per call: {"key", "api", "stream", "sent", "text"}, where "sent"
holds the request members the client was given (without kv_hints) so the
caller can check the rest of the request arrived intact.
"""

import argparse
import json
import sys

import openai

ENVELOPE = {
    "protocol_version": "0.1",
    "message_id": "msg-123",
    "actions": [
        {
            "action_id": "a1",
            "action_type": "kv.fetch",
            "action_version": "1.0",
            "payload": {"source_control_endpoint": "tcp://127.0.0.1:23280", "block_hashes": [11, 22]},
        }
    ],
}


def calls(client, key):
    model = "kvgate-test"
    yield "chat", {
        "model": model,
        "messages": [{"role": "user", "content": "Say ok. é ✓"}],
        "max_tokens": 8,
        "temperature": 0.5,
    }, client.chat.completions.create
    yield "completions", {
        "model": model,
        "prompt": "Say ok",
        "max_tokens": 8,
    }, client.completions.create
    yield "responses", {
        "model": model,
        "input": "Say ok",
        "max_output_tokens": 16,
    }, client.responses.create


def text_of(api, stream, resp):
    if not stream:
        if api == "chat":
            return resp.choices[0].message.content
        if api == "completions":
            return resp.choices[0].text
        return resp.output_text
    out = []
    for ev in resp:
        if api == "chat":
            if ev.choices and ev.choices[0].delta.content:
                out.append(ev.choices[0].delta.content)
        elif api == "completions":
            if ev.choices:
                out.append(ev.choices[0].text)
        elif getattr(ev, "type", "") == "response.output_text.delta":
            out.append(ev.delta)
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", required=True, help="NAME=BASE_URL (e.g. envoy=http://127.0.0.1:10000/v1)")
    args = ap.parse_args()
    failed = False
    for t in args.target:
        name, base = t.split("=", 1)
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=30)
        for api, params, create in calls(client, name):
            for stream in (False, True):
                key = "%s/%s/%s" % (name, api, "stream" if stream else "plain")
                sent = dict(params, stream=stream)
                try:
                    resp = create(**sent, extra_body={"kv_hints": ENVELOPE}, extra_headers={"X-Kvgate-Case": key})
                    text = text_of(api, stream, resp)
                except Exception as ex:  # report every call, then fail
                    print("%s: %s: %s" % (key, type(ex).__name__, ex), file=sys.stderr)
                    failed = True
                    continue
                if text != "ok":
                    print("%s: client parsed %r, want 'ok'" % (key, text), file=sys.stderr)
                    failed = True
                print(json.dumps({"key": key, "api": api, "stream": stream, "sent": sent, "text": text}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
