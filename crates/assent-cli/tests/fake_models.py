"""Fakes of the Gemini API and the OpenAI Responses API for the real Gemini CLI and
Codex CLI in the hook tests (the wire formats of `/work/shared/REAL-CLIENTS.md`).

`python3 fake_models.py gemini|codex PORT_FILE LOG_FILE COMMAND`: listens on a free
loopback port (written to PORT_FILE) and answers the first model request with one shell
call of COMMAND (Gemini: `run_shell_command {command}`; Codex: `exec_command {cmd}`).
A request carrying the call's outcome (Gemini: a `functionResponse`; Codex: a
`function_call_output`) is answered with text, after appending what the model was told
to LOG_FILE as one JSON line (`{"told": ...}`). Anything else gets a short text answer.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KIND, PORT_FILE, LOG_FILE, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


def told(value):
    with open(LOG_FILE, "a") as log:
        log.write(json.dumps({"told": value}) + "\n")


# Gemini: POST /v1beta/models/MODEL:streamGenerateContent?alt=sse (and
# :generateContent, :countTokens).

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}


def gemini_candidate(parts):
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": USAGE}


def gemini_outcome(body):
    for content in body.get("contents", []):
        for part in content.get("parts", []) or []:
            if "functionResponse" in part:
                return part["functionResponse"].get("response")
    return None


def gemini(handler, path, body):
    if path.endswith(":countTokens"):
        return handler.json({"totalTokens": 10})
    outcome = gemini_outcome(body)
    offers_shell = any(
        declaration.get("name") == "run_shell_command"
        for tool in body.get("tools", []) or []
        for declaration in tool.get("functionDeclarations", []) or []
    )
    if outcome is not None:
        told(outcome)
        answer = gemini_candidate([{"text": "Done."}])
    elif offers_shell:
        answer = gemini_candidate([{"functionCall": {"name": "run_shell_command",
                                                     "args": {"command": COMMAND,
                                                              "description": "Run the command"}}}])
    else:
        answer = gemini_candidate([{"text": "ok"}])
    if ":streamGenerateContent" in path:
        handler.stream([("", answer)])
    else:
        handler.json(answer)


# Codex: POST /v1/responses (wire_api = "responses"), streamed.

def codex_outcome(body):
    for item in body.get("input", []) or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return item.get("output")
    return None


def codex(handler, path, body):
    if not path.endswith("/responses"):
        return handler.json({"error": {"message": path}}, 404)
    outcome = codex_outcome(body)
    if outcome is not None:
        told(outcome)
        item = {"type": "message", "role": "assistant", "id": "msg_fake_2",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
    else:
        item = {"type": "function_call", "id": "fc_fake_1", "call_id": "call_fake_1",
                "name": "exec_command", "arguments": json.dumps({"cmd": COMMAND})}
    response = {"id": "resp_fake", "object": "response", "status": "completed", "output": [item],
                "usage": {"input_tokens": 10, "input_tokens_details": None,
                          "output_tokens": 5, "output_tokens_details": None,
                          "total_tokens": 15}}
    handler.stream([
        ("response.created", {"type": "response.created",
                              "response": {"id": "resp_fake", "object": "response", "status": "in_progress", "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length) or b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        (gemini if KIND == "gemini" else codex)(self, path, body)

    def do_GET(self):
        # Model listings and the like: nothing here.
        self.json({"data": [], "models": []})

    def stream(self, events):
        data = "".join(
            (f"event: {name}\n" if name else "") + f"data: {json.dumps(value)}\n\n"
            for name, value in events
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
