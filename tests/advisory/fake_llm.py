"""A local fake of an OpenAI-compatible chat-completions provider, scripted per model."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    """`behaviour[model]` is one of: ("answer", {decision, rationale, evidence}), ("status", 500),
    ("raw", b"..."), ("content", "<not json>"), ("sleep", seconds), ("redirect", url),
    ("trickle", seconds): a valid answer sent one byte per `seconds` (a slow-loris upstream),
    ("endless", None): a body without length that never ends, ("reset", seconds): part of a body,
    then after `seconds` a reset connection,
    ("trickle_headers", seconds): one header line per `seconds`, ("wire", b"..."): these bytes
    as the whole HTTP answer (a malformed status line, too many headers, ...)."""

    def __init__(self) -> None:
        self.behaviour: dict[str, tuple] = {}
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                return

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                body = json.loads(raw)
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                       "raw": raw})
                kind, value = outer.behaviour.get(body.get("model"), ("status", 404))
                if kind == "wire":
                    self.wfile.write(value)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if kind == "endless":  # a close-delimited body that never ends
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.end_headers()
                    try:
                        while True:
                            self.wfile.write(b" " * 65536)
                    except (BrokenPipeError, ConnectionResetError):
                        return
                if kind == "reset":  # the headers and part of the body, then a reset (RST) connection
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"choices": ')
                    self.wfile.flush()
                    time.sleep(value)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    return
                if kind == "trickle_headers":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for index in range(100):
                        try:
                            self.wfile.write(b"x-slow-%d: 1\r\n" % index)
                            self.wfile.flush()
                        except (BrokenPipeError, ConnectionResetError):
                            return
                        time.sleep(value)
                    return
                if kind == "trickle":
                    data = json.dumps({"id": "cmpl-1", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": json.dumps(
                            {"decision": "yes", "rationale": "slow"})}}]}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    for byte in data:
                        try:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                        except (BrokenPipeError, ConnectionResetError):
                            return
                        time.sleep(value)
                    return
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = "answer", {"decision": "yes", "rationale": "late"}
                if kind == "status":
                    self._send(value, b'{"error": "scripted"}')
                elif kind == "redirect":
                    self.send_response(307)
                    self.send_header("Location", value)
                    self.send_header("content-length", "0")
                    self.end_headers()
                elif kind == "raw":
                    self._send(200, value)
                else:
                    content = value if kind == "content" else json.dumps(value)
                    self._send(200, json.dumps({"id": "cmpl-1", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}}]}).encode())

            def _send(self, status, data):
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
