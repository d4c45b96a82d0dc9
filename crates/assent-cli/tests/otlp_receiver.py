"""A small OTLP/HTTP trace receiver for the OpenTelemetry test (issue 57).

Listens on 127.0.0.1 (a free port, printed as the first line of stdout), decodes every
`POST /v1/traces` body as an OTLP `ExportTraceServiceRequest` (protobuf) with the
`opentelemetry-proto` package, and appends each span to the file named by argv[1] as
one JSON line: name, trace and span ids, parent span id, service name and attributes.
Answers with an empty `ExportTraceServiceResponse`, as a collector does.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with open(OUT, "a", encoding="utf-8") as out:
            for resource_spans in request.resource_spans:
                resource = {
                    kv.key: value(kv.value) for kv in resource_spans.resource.attributes
                }
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(
                            json.dumps(
                                {
                                    "name": span.name,
                                    "traceId": span.trace_id.hex(),
                                    "spanId": span.span_id.hex(),
                                    "parentSpanId": span.parent_span_id.hex(),
                                    "service": resource.get("service.name"),
                                    "contentType": self.headers.get("Content-Type"),
                                    "attributes": {
                                        kv.key: value(kv.value) for kv in span.attributes
                                    },
                                }
                            )
                            + "\n"
                        )
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
print(server.server_address[1], flush=True)
server.serve_forever()
