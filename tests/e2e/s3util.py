"""Small helpers shared by the S3 conformance tests."""

import hashlib
import html
import http.client
import http.server
import shutil
import subprocess
import threading
import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

import pytest
from botocore.exceptions import ClientError


def md5_etag(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def s3_error(fn, *args, **kwargs):
    """Calls fn, which must fail with a ClientError; returns (status, code, error dict)."""
    with pytest.raises(ClientError) as ei:
        fn(*args, **kwargs)
    r = ei.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"], r


def error(fn):
    """The S3 error code and HTTP status `fn` (no arguments) fails with."""
    status, code, _ = s3_error(fn)
    return code, status


def expect_error(status, code, fn, *args, **kwargs):
    st, c, r = s3_error(fn, *args, **kwargs)
    assert (st, c) == (status, code), r
    return r


def racing_puts(clients, bucket, key, bodies, **conditions):
    """PUTs bodies[i] through clients[i], all at once, each with the same
    conditional headers; returns (i, HTTP status, S3 error code or None)
    per client, in order."""
    import concurrent.futures

    def put(i):
        try:
            r = clients[i].put_object(Bucket=bucket, Key=key, Body=bodies[i], **conditions)
            return i, status(r), None
        except ClientError as e:
            return i, e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]

    with concurrent.futures.ThreadPoolExecutor(len(clients)) as ex:
        return list(ex.map(put, range(len(clients))))


def status(resp):
    return resp["ResponseMetadata"]["HTTPStatusCode"]


def raw(endpoint, method, path, headers=None, body=None):
    """An unsigned HTTP request; returns (status, headers, body bytes)."""
    u = urlparse(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
        except (BrokenPipeError, ConnectionResetError):
            # The server answered (and closed) before it took the whole
            # body, as HTTP allows (RFC 9112, 9.5): read that answer.
            if conn.sock is None:
                raise
            r = http.client.HTTPResponse(conn.sock, method=method)
            r.begin()
        data = r.read()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
    finally:
        conn.close()


def urlopen(url):
    """GET url with urllib; returns (status, body) also for HTTP errors."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def files_under(path):
    """All files and directories under path, relative, as strings."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def wait_no_tmp(samba, timeout=3.0):
    """Returns the leftover files in the gateway's temp dir after waiting up
    to timeout. The sweep's clock probes (`clock-*`, empty files a gateway
    stopped between making and removing one leaves) are no one's upload."""
    tmp = samba.share_path / ".smbgate" / "tmp"
    deadline = time.time() + timeout
    left = []
    while True:
        left = sorted(p.name for p in tmp.iterdir() if not p.name.startswith("clock-")) if tmp.exists() else []
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)


def browse(directory, port, page):
    """Serves `directory` on 127.0.0.1:`port`, opens `page` there in
    headless Chromium, and returns the text of the element `<pre id="out">`
    of the document Chromium ends on (after redirects), unescaped.
    Fails, never skips, without a browser."""
    assert shutil.which("chromium"), "chromium is not installed: apt-get install chromium (.ci/run does)"
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = subprocess.run(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={directory / 'profile'}", "--virtual-time-budget=15000", "--dump-dom",
             f"http://127.0.0.1:{port}/{page}"],
            capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    assert '<pre id="out">' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    return html.unescape(r.stdout.split('<pre id="out">', 1)[1].split("</pre>", 1)[0])


def peak_rss_mib(pid):
    """The peak resident set size of process `pid` (VmHWM), in MiB; reset it
    to the current RSS by writing "5" to /proc/PID/clear_refs."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def read_lines(path, n, timeout=5):
    """The JSON lines of an access log at `path`, once it holds `n` (or
    after `timeout` seconds, however many it holds)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []
        if len(lines) >= n or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def send_zeros(sock, total):
    """Sends up to `total` zero bytes on `sock` from a thread, a MiB at a
    time, until the server cuts the connection. Returns the thread and a
    one-element list counting the bytes sent."""
    import threading
    sent = [0]

    def run():
        zeros = b"\0" * (1 << 20)
        try:
            while sent[0] < total:
                sock.sendall(zeros)
                sent[0] += len(zeros)
        except OSError:
            pass  # cut: what it is meant to be
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, sent
