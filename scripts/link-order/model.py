"""A model for the link-order workloads: OpenAI's chat completions, streamed.

Usage: model.py PORT_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE). A request whose
last message is the user's and mentions "calculate" gets a call of the
calculator plugin's `calculate` tool; every other request gets the answer
"ok". Both arrive as server-sent events, a word at a time, as from a real
provider.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk(delta, finish=None, usage=None):
    body = {
        "id": "chatcmpl-order",
        "object": "chat.completion.chunk",
        "model": "order",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = request["messages"][-1]
        calls = last["role"] == "user" and "calculate" in str(last.get("content"))
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if calls:
            call = {
                "index": 0,
                "id": "call_order",
                "type": "function",
                "function": {"name": "calculate", "arguments": '{"expression": "40 + 2"}'},
            }
            parts = [
                chunk({"role": "assistant", "tool_calls": [call]}),
                chunk({}, "tool_calls", usage),
            ]
        else:
            parts = [
                chunk({"role": "assistant", "content": "o"}),
                chunk({"content": "k"}),
                chunk({}, "stop", usage),
            ]
        body = b"".join(parts) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
