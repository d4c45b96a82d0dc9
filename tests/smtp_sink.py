"""A real SMTP server on loopback for the email door's tests: aiosmtpd from PyPI.

Prints its port, then one JSON line per message received: the envelope's sender and
recipients and the message as sent (headers and MIME parts), for the test to read.
"""

import json
import socket
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    async def handle_DATA(self, server, session, envelope):
        print(
            json.dumps(
                {
                    "from": envelope.mail_from,
                    "to": envelope.rcpt_tos,
                    "data": envelope.original_content.decode("utf-8", "replace"),
                }
            ),
            flush=True,
        )
        return "250 Message accepted"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


controller = Controller(Sink(), hostname="127.0.0.1", port=free_port())
controller.start()
print(controller.port, flush=True)
try:
    while sys.stdin.read(1):
        pass
finally:
    controller.stop()
