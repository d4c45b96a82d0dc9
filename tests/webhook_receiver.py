"""A webhook receiver for Assent's tests: verifies every delivery with the
`standardwebhooks` package (the specification's own Python library, not Assent's
code) and records it; behaves as each endpoint is told.

Usage: python webhook_receiver.py PORT   (0 picks a free port; the port is printed)

POST /control/NAME  {"secret": "whsec_...", "failures": N, "hang": N, "hangSeconds": S}
    the next N deliveries to /hook/NAME answer 500 (a body with control characters),
    the N after those hang S seconds before answering, the rest answer 204.
POST /hook/NAME     a delivery: verified, recorded, answered as configured.
GET  /received      every delivery so far, as JSON.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
ENDPOINTS = {}
RECEIVED = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length)

    def _answer(self, status, body=b"", content_type="text/plain"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self):
        if self.path == "/received":
            with LOCK:
                body = json.dumps(RECEIVED).encode()
            self._answer(200, body, "application/json")
        else:
            self._answer(404)

    def do_POST(self):
        body = self._body()
        if self.path.startswith("/control/"):
            name = self.path[len("/control/"):]
            with LOCK:
                ENDPOINTS[name] = json.loads(body)
            self._answer(204)
            return
        if not self.path.startswith("/hook/"):
            self._answer(404)
            return
        name = self.path[len("/hook/"):]
        with LOCK:
            config = ENDPOINTS.setdefault(name, {})
            secret = config.get("secret")
            if config.get("failures", 0) > 0:
                config["failures"] -= 1
                action = "fail"
            elif config.get("hang", 0) > 0:
                config["hang"] -= 1
                action = "hang"
            else:
                action = "ok"
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified = False
        error = None
        try:
            Webhook(secret).verify(body, headers)
            verified = True
        except (WebhookVerificationError, Exception) as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
        record = {
            "endpoint": name,
            "id": headers.get("webhook-id"),
            "timestamp": headers.get("webhook-timestamp"),
            "verified": verified,
            "error": error,
            "action": action,
            "body": json.loads(body) if body else None,
            "at": time.time(),
        }
        with LOCK:
            RECEIVED.append(record)
        if action == "fail":
            self._answer(500, b"boom\n\x1b[31mred\x1b[0m <script>")
        elif action == "hang":
            time.sleep(config.get("hangSeconds", 30))
            self._answer(204)
        elif not verified:
            self._answer(400, (error or "").encode())
        else:
            self._answer(204)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
