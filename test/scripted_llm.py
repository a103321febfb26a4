"""A real OpenAI-compatible HTTP server on localhost that plays a script (protocol and fault tests).

A reply is one of:
- ``content(text)`` / ``tool_call(name, arguments)``: a well-formed chat completion;
- ``error(status, message)``: an HTTP error with an OpenAI error body;
- ``raw(body, status=200, content_type=...)``: any bytes as the body (HTML, JSON that is not a
  chat completion, a completion whose fields have the wrong types...);
- ``hang(seconds)``: accept the request and answer nothing for that long (then close);
- ``slow(seconds, reply)``: ``reply``, sent after ``seconds``;
- ``cut()``: announce a body and close the connection half-way.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional


def tool_call(name, arguments, call_id="call_1"):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}


def content(text):
    return {"content": text}


def error(status, message, code=None):
    return {"status": status, "error": {"message": message, "type": "invalid_request_error", "code": code}}


def raw(body, status=200, content_type="application/json"):
    return {"raw": body.encode() if isinstance(body, str) else body, "status": status, "content_type": content_type}


def hang(seconds):
    return {"hang": float(seconds)}


def slow(seconds, reply):
    return {**reply, "delay": float(seconds)}


def cut():
    return {"cut": True}


def completion(message: dict, usage: Optional[dict] = None) -> dict:
    """A chat completion body around ``message`` (any shape: fault tests)."""
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 2}}


def first_user_message(body: dict) -> str:
    for m in body.get("messages", []):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


class ScriptedLLM:
    """Answers POST /v1/chat/completions with the next scripted reply; keeps every request.
    The last reply repeats when the script runs out.  ``choose(body, n)``, if given, picks the
    reply instead (e.g. by the question: one server plays a different fault per question)."""

    def __init__(self, script: list[dict], choose: Optional[Callable[[dict, int], dict]] = None):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                try:
                    self._reply()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

            def _send(self, status, data, content_type="application/json", length=None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data) if length is None else length))
                self.end_headers()
                self.wfile.write(data)

            def _reply(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.requests.append(body)
                    n = len(outer.requests)
                reply = choose(body, n) if choose else outer.script[min(n, len(outer.script)) - 1]
                if "delay" in reply:  # a slow model: answers, but late
                    outer._stop.wait(reply["delay"])
                if "hang" in reply:
                    outer._stop.wait(reply["hang"])
                    self.close_connection = True
                    return
                if "cut" in reply:
                    self._send(200, b'{"id": "chatcmpl-x", "choi', length=4096)
                    self.close_connection = True
                    return
                if "raw" in reply:
                    self._send(reply["status"], reply["raw"], reply["content_type"])
                    return
                if "status" in reply:
                    self._send(reply["status"], json.dumps({"error": reply["error"]}).encode())
                    return
                message = {"role": "assistant", "content": reply.get("content")}
                if reply.get("tool_calls"):
                    message["tool_calls"] = reply["tool_calls"]
                payload = {
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 100 * len(body["messages"]), "completion_tokens": 20,
                              "total_tokens": 100 * len(body["messages"]) + 20}}
                self._send(200, json.dumps(payload).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()  # release hanging handlers
        self.server.shutdown()
        self.server.server_close()
