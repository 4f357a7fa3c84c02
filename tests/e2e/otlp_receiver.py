"""A small OTLP/HTTP trace receiver for the tests: it takes
`POST /v1/traces` with a protobuf ExportTraceServiceRequest (decoded with
the OpenTelemetry project's own generated classes, PyPI
`opentelemetry-proto`) and keeps every span it was sent."""

import http.server
import threading
import time

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

# Span kinds, as OTLP numbers them (opentelemetry/proto/trace/v1/trace.proto).
SERVER, CLIENT = 2, 3
STATUS_ERROR = 2


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Span:
    """One received span, its attributes as a dict, ids as hex."""

    def __init__(self, span, resource):
        self.name = span.name
        self.kind = span.kind
        self.trace_id = span.trace_id.hex()
        self.span_id = span.span_id.hex()
        self.parent_id = span.parent_span_id.hex()
        self.attrs = {a.key: _value(a.value) for a in span.attributes}
        self.status = span.status.code
        self.resource = resource

    def __repr__(self):
        return f"Span({self.name!r}, kind={self.kind}, attrs={self.attrs})"


class Receiver:
    """Listens on 127.0.0.1 (`endpoint`); `spans` is what came."""

    def __init__(self):
        self.spans = []
        self.requests = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                with receiver.lock:
                    receiver.requests.append((self.path, self.headers.get("Content-Type")))
                    for rs in req.resource_spans:
                        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            receiver.spans.extend(Span(s, resource) for s in ss.spans)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def server_span(self, request_id, timeout=15):
        """The server span whose aws.request_id is `request_id`, waiting for
        it; fails if there is not exactly one."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                found = [s for s in self.spans if s.kind == SERVER and s.attrs.get("aws.request_id") == request_id]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(found) == 1, f"{len(found)} server spans for {request_id}"
        return found[0]

    def trace(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def descendants(self, root):
        """Every span under `root` in its trace."""
        spans = self.trace(root.trace_id)
        found, frontier = [], {root.span_id}
        while frontier:
            children = [s for s in spans if s.parent_id in frontier]
            found += children
            frontier = {s.span_id for s in children}
        return found

    def stop(self):
        self.server.shutdown()
