"""A stand-in for an OpenAI-compatible LLM worker, for the compose quick start.

It answers every POST with a chat completion whose message content is the
request body it received, so a client sees exactly what kvgate forwarded.
GET /health answers 200. Standard library only.
"""

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        self._reply(200 if self.path == "/health" else 404, {"status": "ok"})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        self._reply(200, {
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "echo",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": body}}],
        })

    def _reply(self, status, doc):
        b = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    ThreadingHTTPServer(("0.0.0.0", args.port), Echo).serve_forever()


if __name__ == "__main__":
    main()
