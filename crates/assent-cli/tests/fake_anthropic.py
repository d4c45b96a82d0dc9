"""A fake of the Anthropic Messages API for the real Claude Code CLI in the hook tests.

`python3 fake_anthropic.py PORT_FILE LOG_FILE COMMAND`: listens on a free loopback port
(written to PORT_FILE), answers the first request that offers the `Bash` tool with a
streamed `tool_use` of `Bash {command: COMMAND}`, and any request carrying a
`tool_result` with text, after appending that tool_result (what the model was told) to
LOG_FILE as one JSON line, and the whole request's last message (the tool_result and
whatever the client put beside it, such as a hook's additional context) to
LOG_FILE + ".message" as one JSON line. Other requests get a short text answer.

With `FAKE_DESCRIPTIONS="first|second|…"` in its environment, the model makes one call
of the same COMMAND per description, in one conversation (so in one Claude Code
session), each after the previous one's tool_result; then it answers with text.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, LOG_FILE, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3]
DESCRIPTIONS = [d for d in os.environ.get("FAKE_DESCRIPTIONS", "").split("|") if d] or ["Run the command"]
# With `FAKE_TOOL=NAME` and `FAKE_INPUT=JSON`, the one call is of that tool with that
# input (a `Write` of a file, say) instead of `Bash {command: COMMAND}`.
TOOL_NAME = os.environ.get("FAKE_TOOL", "Bash")
TOOL_INPUT = json.loads(os.environ["FAKE_INPUT"]) if "FAKE_INPUT" in os.environ else None


def sse(events):
    return "".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events
    ).encode()


def message_start():
    return ("message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})


def tool_use(n=0):
    arguments = json.dumps(TOOL_INPUT if TOOL_INPUT is not None
                           else {"command": COMMAND, "description": DESCRIPTIONS[n]})
    return [
        message_start(),
        ("content_block_start", {"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": f"toolu_fake_{n + 1}", "name": TOOL_NAME, "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": arguments}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def text(words):
    return [
        message_start(),
        ("content_block_start", {"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": words}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def tool_results(body):
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            found.extend(block for block in content if block.get("type") == "tool_result")
    return found


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.json({"input_tokens": 10})
        if not path.endswith("/v1/messages"):
            return self.json({"type": "error", "error": {"type": "not_found_error", "message": path}}, 404)
        results = tool_results(body)
        offers_bash = any(tool.get("name") == "Bash" for tool in body.get("tools", []))
        if results and len(results) < len(DESCRIPTIONS) and offers_bash:
            with open(LOG_FILE, "a") as log:
                log.write(json.dumps(results[-1]) + "\n")
            with open(LOG_FILE + ".message", "a") as log:
                log.write(json.dumps(body.get("messages", [])[-1]) + "\n")
            events = tool_use(len(results))
        elif results:
            with open(LOG_FILE, "a") as log:
                log.write(json.dumps(results[-1]) + "\n")
            with open(LOG_FILE + ".message", "a") as log:
                log.write(json.dumps(body.get("messages", [])[-1]) + "\n")
            events = text("Done.")
        elif offers_bash:
            events = tool_use()
        else:
            events = text("ok")
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(sse(events))
        else:
            blocks = [e[1]["content_block"] for e in events if e[0] == "content_block_start"]
            self.json({"id": "msg_fake", "type": "message", "role": "assistant",
                       "model": "claude-sonnet-4-5", "content": blocks,
                       "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})

    def do_GET(self):
        self.json({"type": "error", "error": {"type": "not_found_error", "message": self.path}}, 404)

    def json(self, value, status=200):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
