"""A webhook receiver and the helpers of the event tests (test_events.py,
test_share_events.py): a config file with a `[targets.hooks]` webhook, a
bucket's notification configuration, what stays queued on the share."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import Gateway, _free_port

SECRET = "webhook-signing-key"
ARN = "arn:smbgate:sqs::hooks"


class Receiver:
    """A webhook receiver on `port`: keeps every POST's JSON and headers
    (`got`; `test_events` the s3:TestEvent messages); answers `status`
    (set it to 503 to refuse)."""

    def __init__(self, port=None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.got = []
        # Every POST, kept or refused.
        self.tried = 0
        # The s3:TestEvent messages, apart from the events.
        self.test_events = []
        # time.time() of each kept POST, for scripts/bench-events.
        self.arrived = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                # The answer is decided before the try is counted: a test
                # that changes `status` once it sees the count changes the
                # next answer, not this one.
                status = receiver.status
                receiver.tried += 1
                if status == 200 and b'"s3:TestEvent"' in body:
                    receiver.test_events.append(json.loads(body))
                elif status == 200:
                    receiver.arrived.append(time.time())
                    receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self):
        return [json.loads(b)["Records"][0] for _, b in self.got]

    def wait_for(self, n, timeout=60):
        deadline = time.time() + timeout
        while len(self.got) < n and time.time() < deadline:
            time.sleep(0.05)
        return self.records()

    def wait_for_test_event(self, timeout=10):
        """The s3:TestEvent messages, once one has come."""
        deadline = time.time() + timeout
        while not self.test_events and time.time() < deadline:
            time.sleep(0.05)
        return self.test_events

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def config_file(tmp_path, targets):
    p = tmp_path / "smbgate.toml"
    p.write_text(targets)
    p.chmod(0o600)
    return p


def webhook_target(url, extra=""):
    return f'[targets.hooks]\ntype = "webhook"\nurl = "{url}"\nsecret = "{SECRET}"\n{extra}'


def webhook_gateway(samba, tmp_path, url, **kw):
    """A gateway on `samba` whose config file has the webhook target
    `hooks` posting to `url`."""
    return Gateway(samba, "--config", str(config_file(tmp_path, webhook_target(url))), **kw)


def new_configured_bucket(gw, bucket, events, **kw):
    """(a client of `gw`, the answer) once `bucket` is made and given a
    configuration for `events` (`configure`'s options)."""
    s3 = gw.client()
    s3.create_bucket(Bucket=bucket)
    return s3, configure(s3, bucket, events, **kw)


def configure(s3, bucket, events, prefix=None, arn=ARN):
    cfg = {"QueueArn": arn, "Events": events}
    if prefix:
        cfg["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
    return s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"QueueConfigurations": [cfg]})


def queued_on_share(samba):
    root = samba.share_path / ".smbgate" / "events"
    return sorted(p.name for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def wait_until_nothing_queued(samba, timeout=10):
    """What stays queued on the share once the queues emptied (or
    `timeout` seconds passed)."""
    deadline = time.time() + timeout
    while queued_on_share(samba) and time.time() < deadline:
        time.sleep(0.05)
    return queued_on_share(samba)
