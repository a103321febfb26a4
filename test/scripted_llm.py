"""A real OpenAI-compatible HTTP server on localhost that plays a script (protocol tests)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tool_call(name, arguments, call_id="call_1"):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}


def content(text):
    return {"content": text}


def error(status, message, code=None):
    return {"status": status, "error": {"message": message, "type": "invalid_request_error", "code": code}}


class ScriptedLLM:
    """Answers POST /v1/chat/completions with the next scripted reply; keeps every request.
    The last reply repeats when the script runs out."""

    def __init__(self, script: list[dict]):
        self.script = list(script)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                reply = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                if "status" in reply:
                    payload, status = {"error": reply["error"]}, reply["status"]
                else:
                    message = {"role": "assistant", "content": reply.get("content")}
                    if reply.get("tool_calls"):
                        message["tool_calls"] = reply["tool_calls"]
                    payload, status = {
                        "id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion", "created": 0,
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "message": message,
                                     "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}],
                        "usage": {"prompt_tokens": 100 * len(body["messages"]), "completion_tokens": 20,
                                  "total_tokens": 100 * len(body["messages"]) + 20}}, 200
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
