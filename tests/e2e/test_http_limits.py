"""HTTP server limits: a client that never finishes its headers is dropped
after --header-read-timeout, and past --max-connections further clients
wait until a connection closes (they are not served, and cost nothing)."""

import contextlib
import signal
import socket
import time
import urllib.request
from urllib.parse import urlparse

import pytest

from conftest import Gateway, _free_port
from s3util import raw


def connect(gw):
    return socket.create_connection(("127.0.0.1", gw.port), timeout=10)


def answered_within(sock, seconds):
    """The first bytes the server sends within `seconds`, or None."""
    sock.settimeout(seconds)
    try:
        return sock.recv(4096)
    except socket.timeout:
        return None


def error_answer(sock, seconds):
    """The answer the server sends within `seconds`, read on to its
    `</Error>` (or None), and how long its first bytes took."""
    t0 = time.monotonic()
    got = answered_within(sock, seconds)
    took = time.monotonic() - t0
    while got and b"</Error>" not in got:
        more = answered_within(sock, 5)
        if not more:
            break
        got += more
    return got, took


def temp_files(gw):
    """Names of the gateway's temp files on the share now."""
    tmp = gw.samba.share_path / ".smbgate" / "tmp"
    return set(p.name for p in tmp.iterdir()) if tmp.exists() else set()


def assert_no_new_temp_files(gw, before, timeout=10):
    """No temp file beside those in `before` is left (after up to `timeout` s)."""
    deadline = time.monotonic() + timeout
    while temp_files(gw) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert temp_files(gw) - before == set()


@pytest.fixture
def gw(samba, request):
    g = Gateway(samba, env=request.param)
    yield g
    g.stop()


@pytest.mark.parametrize("gw", [{"SMBGATE_HEADER_READ_TIMEOUT": "1"}], indirect=True)
def test_a_client_that_never_finishes_its_headers_is_dropped(gw):
    s = connect(gw)
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line, ever
    t0 = time.monotonic()
    got = answered_within(s, 10)
    assert got is not None and time.monotonic() - t0 < 5, got
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
    # Other clients are served meanwhile.
    s2 = connect(gw)
    s2.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answered_within(s2, 5).startswith(b"HTTP/1.1 200")


# Every connection comes from one address: it may hold all of them.
@pytest.mark.parametrize("gw", [{"SMBGATE_MAX_CONNECTIONS": "2", "SMBGATE_MAX_CONNECTIONS_PER_CLIENT": "3"}],
                         indirect=True)
def test_past_the_connection_cap_a_client_waits_for_a_free_slot(gw):
    # The two slots are held by requests being worked on (PUTs whose bodies
    # keep coming, a byte at a time): an idle connection, or one whose
    # request waits on a body that stopped, would make way (see below).
    import threading
    s3 = gw.client()
    s3.create_bucket(Bucket="capped")
    url = urlparse(s3.generate_presigned_url("put_object", Params={"Bucket": "capped", "Key": "k"}))
    put = f"PUT {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Length: 1000\r\n\r\n".encode()
    s3.close()  # its kept-alive connection would hold a slot
    time.sleep(0.3)
    held = [connect(gw), connect(gw)]
    for h in held:
        h.sendall(put)
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.2):
            for h in list(held):
                with contextlib.suppress(OSError):
                    h.sendall(b"x")
    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        time.sleep(0.3)  # both accepted: the two slots are taken
        waiting = connect(gw)  # the kernel's backlog still accepts the TCP connection
        waiting.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert answered_within(waiting, 3) is None, "served past the cap"
        held.pop().close()
        got = answered_within(waiting, 5)
        assert got is not None and got.startswith(b"HTTP/1.1 200"), got
    finally:
        stop.set()
        feeder.join()


def test_a_form_s_fields_are_bounded_before_its_file(gateway, bucket):
    """POST Object reads at most 20 KiB of fields before the file part: a
    form that sends more is refused with 400 MaxPostPreDataLengthExceededError
    at once, though it claims 100 MiB and has sent 30 KiB of one field."""
    import socket
    host, port = gateway.endpoint.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((f"POST /{bucket} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                   "Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 104857600\r\n\r\n"
                   "--xyz\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n").encode() + b"k" * (30 << 10))
        got = s.recv(65536).decode(errors="replace")
    assert got.startswith("HTTP/1.1 400"), got
    assert "<Code>MaxPostPreDataLengthExceededError</Code>" in got


def test_xml_bodies_are_bounded(s3, bucket, gateway):
    """A CompleteMultipartUpload body over 4 MiB is refused with 400, not
    read whole; the body is drained, so the client reads the answer and the
    connection serves the next request."""
    import http.client
    import urllib.parse
    up = s3.create_multipart_upload(Bucket=bucket, Key="big-xml")["UploadId"]
    url = urllib.parse.urlparse(s3.generate_presigned_url(
        "complete_multipart_upload", Params={"Bucket": bucket, "Key": "big-xml", "UploadId": up}))
    body = b"<CompleteMultipartUpload>" + b"<Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>" * 90000 + \
        b"</CompleteMultipartUpload>"
    assert len(body) > 4 << 20
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.request("POST", url.path + "?" + url.query, body=body)
    r = conn.getresponse()
    resp = r.read()
    assert r.status == 400 and b"<Code>MaxMessageLengthExceeded</Code>" in resp, (r.status, resp[:300])
    conn.request("HEAD", "/")
    assert conn.getresponse().status == 200, "the same connection answers the next request"
    conn.close()
    assert s3.list_parts(Bucket=bucket, Key="big-xml", UploadId=up)["UploadId"] == up  # untouched


@pytest.mark.parametrize("target", ["bucket", "upload"])
def test_expect_continue_into_a_missing_bucket_gets_its_status_without_100(s3, bucket, gateway, target):
    """Issue 11, item 13: the request fails before its body is needed, so
    the answer is the final 404, no 100 Continue, and the connection is
    closed cleanly (the client never sent the body)."""
    import urllib.parse
    if target == "bucket":
        params, op, code = {"Bucket": "no-such-bucket-expect", "Key": "k"}, "put_object", "NoSuchBucket"
    else:
        params = {"Bucket": bucket, "Key": "k", "UploadId": "no-such-upload", "PartNumber": 1}
        op, code = "upload_part", "NoSuchUpload"
    url = urllib.parse.urlparse(s3.generate_presigned_url(op, Params=params))
    with socket.create_connection((url.hostname, url.port), timeout=10) as s:
        s.sendall((f"PUT {url.path}?{url.query} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\n"
                   "Content-Length: 3000000\r\nExpect: 100-continue\r\n\r\n").encode())
        got = b""
        while True:
            chunk = s.recv(65536)  # a reset would raise here, a hang time out
            if not chunk:
                break
            got += chunk
    text = got.decode(errors="replace")
    assert text.startswith("HTTP/1.1 404"), text[:200]
    assert "100 Continue" not in text
    assert f"<Code>{code}</Code>" in text


@pytest.mark.parametrize("gw", [{"SMBGATE_BODY_READ_TIMEOUT": "2s"}], indirect=True)
@pytest.mark.parametrize("size", [64 << 10, 8 << 20], ids=["small", "large"])
def test_a_body_that_stalls_gets_400_request_timeout_and_leaves_the_old_object(gw, size):
    # Issue 10, HTTP limits: a client that stops sending its body (a stalled
    # upload, a slow-loris) no longer holds the request, its temp file and
    # its SMB handle forever. After --body-read-timeout without a byte it
    # gets AWS's 400 RequestTimeout; the old version stays and no temp file
    # is left. Small bodies (buffered) and large ones (streamed) alike.
    import urllib.parse
    before = temp_files(gw)
    s3 = gw.client()
    s3.create_bucket(Bucket="stall")
    s3.put_object(Bucket="stall", Key="k", Body=b"old")
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": "stall", "Key": "k"}, ExpiresIn=600)
    u = urllib.parse.urlsplit(url)
    s = connect(gw)
    s.sendall(f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {size + 1}\r\n\r\n".encode())
    s.sendall(b"x" * size)  # one byte short, then nothing
    got, _ = error_answer(s, 30)
    assert got is not None and got.startswith(b"HTTP/1.1 400"), got
    assert b"<Code>RequestTimeout</Code>" in got, got
    s.close()
    assert s3.get_object(Bucket="stall", Key="k")["Body"].read() == b"old"
    assert_no_new_temp_files(gw, before)


# Issue 23, point 1: idle connections (nothing sent, a partial first line,
# or an HTTP/2 preface with no stream) once held their slots forever, on
# the S3 and the metrics listeners alike, and SIGHUP waited for a free slot.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def connect_from(source, port, first=b""):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    if first:
        s.sendall(first)
    return s


@contextlib.contextmanager
def flood(port, n, first=b"", source="127.0.0.2"):
    """`n` connections from `source` that send `first` and then nothing."""
    socks = []
    try:
        socks = [connect_from(source, port, first) for _ in range(n)]
        yield socks
    finally:
        for s in socks:
            s.close()


def closed_within(sock, seconds):
    """True if the server closes `sock` within `seconds` (anything it sends
    first, an HTTP/2 GOAWAY or a 408, is read past)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
    return False


def still_open_after(socks, seconds):
    """Those of `socks` the server has not closed within `seconds`."""
    deadline = time.monotonic() + seconds
    return [s for s in socks if not closed_within(s, max(0.01, deadline - time.monotonic()))]


def head_from(source, port, seconds):
    s = connect_from(source, port, b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    try:
        return answered_within(s, seconds)
    finally:
        s.close()


@pytest.mark.parametrize("first", [b"", b"GE", H2_PREFACE], ids=["silent", "partial", "h2-preface"])
def test_one_address_cannot_take_every_slot_and_idle_connections_are_closed(samba, first):
    g = Gateway(samba, env={"SMBGATE_MAX_CONNECTIONS": "40", "SMBGATE_HEADER_READ_TIMEOUT": "3"})
    try:
        with flood(g.port, 40 + 100, first) as idle:
            # Another address is served at once: 127.0.0.2 holds only its
            # share (a quarter of the slots), and the rest of its
            # connections are closed at once.
            got = head_from("127.0.0.3", g.port, 2)
            assert got is not None and got.startswith(b"HTTP/1.1 200"), got
            # After the first-request deadline, none is left open.
            still_open = still_open_after(idle, 3 + 2)
            assert still_open == [], f"{len(still_open)} idle connections still open after the deadline"
    finally:
        g.stop()


@pytest.mark.parametrize("first", [b"", H2_PREFACE], ids=["silent", "h2-preface"])
def test_idle_connections_from_a_trusted_proxy_fill_the_slots_then_go_and_sighup_is_heard(samba, tmp_path, first):
    # A trusted proxy may take every slot; its idle connections still go at
    # the deadline, and a SIGHUP sent while every slot is taken is heard.
    cfg = tmp_path / "smbgate.toml"
    user = '[users.{0}]\naccess_key = "{1}"\nsecret_key = "{2}"\nbuckets = ["*"]\n'
    cfg.write_text(user.format("ann", "AKANN000000000000001", "ann-secret-0001"))
    g = Gateway(samba, "--trusted-proxy", "127.0.0.2",
                env={"SMBGATE_MAX_CONNECTIONS": "20", "SMBGATE_HEADER_READ_TIMEOUT": "6",
                     "SMBGATE_CONFIG": str(cfg), "SMBGATE_ACCESS_KEY": None, "SMBGATE_SECRET_KEY": None,
                     "SMBGATE_LOG": "info"})
    try:
        t0 = time.monotonic()
        with flood(g.port, 20 + 100, first) as idle:
            time.sleep(0.5)  # the first 20 are accepted: every slot is taken
            cfg.write_text(cfg.read_text() + user.format("bea", "AKBEA000000000000002", "bea-secret-0002"))
            g.proc.send_signal(signal.SIGHUP)
            wait_for_log(g, "SIGHUP: users reloaded", timeout=3)
            assert time.monotonic() - t0 < 6, "heard only once a slot came free"
            # Another client is served long before the deadlines alone
            # would let it in: connections idle for a second make way for
            # new ones while every slot is taken. It queues behind the 100
            # others, let in 20 at a time about a second apart (some 6 s
            # in all), where the deadlines alone would take six times 6 s.
            got = head_from("127.0.0.3", g.port, 15)
            assert got is not None and got.startswith(b"HTTP/1.1 200"), got
            # The last of the idle ones were accepted just now.
            still_open = still_open_after(idle, 6 + 2)
            assert still_open == [], f"{len(still_open)} idle connections still open after the deadline"
    finally:
        g.stop()


def test_idle_connections_cannot_keep_the_readiness_probe_out(samba):
    mport = _free_port()
    g = Gateway(samba, env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{mport}", "SMBGATE_HEADER_READ_TIMEOUT": "3"})
    try:
        with flood(mport, 64 + 100) as idle:
            t0 = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/health/ready", timeout=3 + 2) as r:
                assert r.status == 200
            assert time.monotonic() - t0 < 3 + 2
            still_open = still_open_after(idle, 3 + 2)
            assert still_open == [], f"{len(still_open)} idle connections still open after the deadline"
    finally:
        g.stop()


def wait_for_log(g, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        g.log.flush()
        if text in open(g.log.name).read():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged within {timeout} s")


@pytest.mark.parametrize("gw", [{"SMBGATE_BODY_READ_TIMEOUT": "2s", "SMBGATE_BODY_MIN_RATE": "100"}], indirect=True)
def test_a_trickling_body_gets_400_request_timeout_once_its_average_is_too_slow(gw):
    # Issue 23, point 4: a byte just before each body-read timeout once kept
    # a PUT (its SMB handle and temp file) open for as long as the client
    # liked. After the body-read timeout, a body must average at least
    # --body-min-rate: this one sends 2 bytes a second, every chunk in time.
    import urllib.parse
    before = temp_files(gw)
    s3 = gw.client()
    s3.create_bucket(Bucket="trickle")
    s3.put_object(Bucket="trickle", Key="k", Body=b"old")
    u = urllib.parse.urlsplit(gw.client(signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": "trickle", "Key": "k"}, ExpiresIn=600))
    s = connect(gw)
    s.sendall(f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: 1000\r\n\r\n".encode())
    t0 = time.monotonic()
    got = b""
    while time.monotonic() - t0 < 15 and not got:
        try:
            s.sendall(b"x")
        except (BrokenPipeError, ConnectionResetError):
            break
        got = answered_within(s, 0.5) or b""
    while got and b"</Error>" not in got:
        more = answered_within(s, 5)
        if not more:
            break
        got += more
    took = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 400") and b"<Code>RequestTimeout</Code>" in got, got
    # Soon after the 2 s timeout, where it once went on for the whole body.
    assert took < 2 + 8, f"cut after {took:.1f} s"
    s.close()
    assert s3.get_object(Bucket="trickle", Key="k")["Body"].read() == b"old"
    assert_no_new_temp_files(gw, before)


def test_a_get_whose_client_stops_reading_is_cut_and_its_handle_closed(own_samba):
    # Issue 23, point 4: a GET whose client stops reading once held its SMB
    # handle for as long as the TCP connection lived. After --send-timeout
    # with nothing taken, the connection is closed and so is the handle.
    from conftest import open_handles
    # A small read-ahead budget, so that the GET reads as its client takes
    # the bytes and keeps the object open meanwhile.
    g = Gateway(own_samba, env={"SMBGATE_SEND_TIMEOUT": "2s", "SMBGATE_READ_AHEAD_BUDGET": "1MiB"})
    try:
        c = started_get(g, "stalled", 32 << 20)
        time.sleep(0.5)
        assert open_handles(own_samba, "big.bin"), "the GET holds the object open"
        # Nothing more is read: the server fills the socket, then waits.
        deadline = time.monotonic() + 2 + 5
        while open_handles(own_samba, "big.bin") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_handles(own_samba, "big.bin") == []
        # The connection is gone: what was buffered, then the end.
        c.settimeout(5)
        total = 0
        while True:
            try:
                b = c.recv(1 << 20)
            except ConnectionResetError:
                break
            if not b:
                break
            total += len(b)
        assert total < 32 << 20, "the whole object was sent"
        c.close()
    finally:
        g.stop()


def xml_budget_in_use(mport):
    """The bytes of the XML body budget taken now, from /metrics."""
    import re
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
        text = r.read().decode()
    return int(float(re.search(r"^smbgate_xml_body_in_use_bytes (\S+)$", text, re.M).group(1)))


def wait_for_xml_budget(mport, want):
    deadline = time.monotonic() + 10
    while (got := xml_budget_in_use(mport)) != want:
        assert time.monotonic() < deadline, f"{got} bytes of the XML budget taken, not {want}"
        time.sleep(0.05)


def test_xml_bodies_share_one_budget_across_connections(samba):
    # Issue 23, point 4: each XML body may be 4 MiB, and was bounded per
    # request only, so many connections (or the streams of one HTTP/2
    # connection) could each hold that much. Six connections each declare a
    # 4 MiB DeleteObjects body, signed (presigned URLs: since issue 43 an
    # unsigned one is refused before its body is read), and stall in it:
    # the first two take the whole 8 MiB budget. Another DeleteObjects then
    # waits 5 s for its share and gets 503 SlowDown; once the stalled
    # connections close, it goes through.
    mport = _free_port()
    gw = Gateway(samba, env={"SMBGATE_XML_BODY_BUDGET": "8MiB", "SMBGATE_BODY_READ_TIMEOUT": "30s",
                             "SMBGATE_METRICS_LISTEN": f"127.0.0.1:{mport}"})
    try:
        xml_bodies_share_one_budget(gw, mport)
    finally:
        gw.stop()


def xml_bodies_share_one_budget(gw, mport):
    import urllib.parse
    s3 = gw.client()
    s3.create_bucket(Bucket="budget")
    s3.put_object(Bucket="budget", Key="k", Body=b"x")
    url = urllib.parse.urlsplit(presign(gw, "POST", "/budget?delete"))
    stalled = []
    for _ in range(6):
        s = connect(gw)
        s.sendall(f"POST {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                  "Content-Length: 4194304\r\n\r\n".encode() + b"<Delete>" + b" " * 1024)
        stalled.append(s)
    wait_for_xml_budget(mport, 8 << 20)
    delete = {"Objects": [{"Key": "k"}], "Quiet": True}
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:
        s3.delete_objects(Bucket="budget", Delete=delete)
    took = time.monotonic() - t0
    err = e.value.response
    assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]) == (503, "SlowDown"), err
    # After its 5 s wait, and long before the stalled bodies' 30 s.
    assert 4.5 < took < 5 + 10, f"answered after {took:.1f} s"
    assert s3.get_object(Bucket="budget", Key="k")["Body"].read() == b"x"
    for s in stalled:
        s.close()
    # The four that waited take the budget as the first two give it back.
    wait_for_xml_budget(mport, 0)
    assert s3.delete_objects(Bucket="budget", Delete=delete).get("Errors", []) == []
    assert s3.list_objects_v2(Bucket="budget")["KeyCount"] == 0
    s3.delete_bucket(Bucket="budget")


def presign(gw, method, path_and_query):
    """A SigV4 presigned URL for `method` on `path_and_query`, signed by
    botocore with the test key (valid 10 minutes)."""
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from conftest import ACCESS_KEY, REGION, SECRET_KEY
    req = AWSRequest(method=method, url=gw.endpoint + path_and_query)
    S3SigV4QueryAuth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION, expires=600).add_auth(req)
    return req.url


def test_stalled_unsigned_delete_objects_bodies_hold_nothing(gateway, s3, bucket):
    # Issue 43, item 2: DeleteObjects bodies were read before any signature
    # was checked. Sixteen connections that sent the headers of an unsigned
    # 4 MiB DeleteObjects and then nothing held the whole 64 MiB XML body
    # budget: every CompleteMultipartUpload beside them waited 5 s for 503
    # SlowDown, and the connections were still held a minute later.
    up = s3.create_multipart_upload(Bucket=bucket, Key="beside")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="beside", UploadId=up, PartNumber=1, Body=b"p" * 1024)["ETag"]
    port = int(gateway.endpoint.rsplit(":", 1)[1])
    stalled = []
    for _ in range(16):
        s = connect_from("127.0.0.4", port, f"POST /{bucket}?delete HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Content-Length: 4194304\r\n\r\n<Delete>".encode())
        stalled.append(s)
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        r = s3.complete_multipart_upload(Bucket=bucket, Key="beside", UploadId=up,
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        took = time.monotonic() - t0
        assert r["ETag"].endswith('-1"'), r
        # Not the 5 s wait for a budget the stalled bodies held.
        assert took < 4.5, f"CompleteMultipartUpload took {took:.1f} s beside the stalled bodies"
        # Each was answered 403 at once, and its connection is closed once
        # the rest of its body has not come within the drain's 5 s.
        for s in stalled:
            got = answered_within(s, 2)
            assert got is not None and got.startswith(b"HTTP/1.1 403"), got
        still_open = still_open_after(stalled, 5 + 3)
        assert still_open == [], f"{len(still_open)} stalled connections still open"
    finally:
        for s in stalled:
            s.close()


@pytest.mark.parametrize("gw", [{"SMBGATE_BODY_READ_TIMEOUT": "2s"}], indirect=True)
def test_a_signed_xml_body_that_stalls_gets_request_timeout(gw):
    # Issue 43, item 2: an XML body read whole holds its share of the budget
    # until it ends, so it must keep coming like an object body.
    import urllib.parse
    s3 = gw.client()
    s3.create_bucket(Bucket="stall-xml")
    up = s3.create_multipart_upload(Bucket="stall-xml", Key="k")["UploadId"]
    url = urllib.parse.urlsplit(gw.client(signature_version="s3v4").generate_presigned_url(
        "complete_multipart_upload", Params={"Bucket": "stall-xml", "Key": "k", "UploadId": up}, ExpiresIn=600))
    s = connect(gw)
    s.sendall(f"POST {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n"
              "Content-Length: 1000\r\n\r\n<CompleteMultipartUpload>".encode())
    got, took = error_answer(s, 15)
    assert got is not None and got.startswith(b"HTTP/1.1 400"), got
    assert b"<Code>RequestTimeout</Code>" in got, got
    assert took < 2 + 5, f"answered after {took:.1f} s"
    s.close()
    assert s3.list_multipart_uploads(Bucket="stall-xml")["Uploads"][0]["UploadId"] == up


# Issue 43, item 1: a form's data before its file part is read before
# anything is authenticated, so it is bounded in bytes and in time. 512 MiB
# of zeros sent as a form whose boundary never comes once raised the
# gateway's RSS by 509 MiB.
def test_a_form_whose_boundary_never_comes_is_refused_without_holding_it(samba):
    from s3util import peak_rss_mib, send_zeros
    g = Gateway(samba)
    try:
        gw_rss = lambda: peak_rss_mib(g.proc.pid)  # noqa: E731
        open(f"/proc/{g.proc.pid}/clear_refs", "w").write("5")
        before = gw_rss()
        s = connect(g)
        s.sendall(b"POST /no-such-bucket HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: multipart/form-data; boundary=never\r\nContent-Length: 536870912\r\n\r\n")
        t, sent = send_zeros(s, 512 << 20)
        got, took = error_answer(s, 30)
        assert got is not None and got.startswith(b"HTTP/1.1 400"), got
        assert b"<Code>MaxPostPreDataLengthExceededError</Code>" in got, got
        assert took < 5, f"answered after {took:.1f} s"
        s.close()
        t.join(10)
        grew = gw_rss() - before
        assert grew < 16, f"the gateway's peak RSS grew by {grew:.0f} MiB ({sent[0] >> 20} MiB sent)"
        # The gateway still serves.
        got = head_from("127.0.0.3", g.port, 2)
        assert got is not None and got.startswith(b"HTTP/1.1 200"), got
    finally:
        g.stop()


@pytest.mark.parametrize("gw", [{"SMBGATE_HEADER_READ_TIMEOUT": "2"}], indirect=True)
def test_a_form_whose_fields_stop_coming_gets_request_timeout(gw):
    # Before the connection: the gateway's clock starts no earlier.
    t0 = time.monotonic()
    s = connect(gw)
    s.sendall(b"POST /anything HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 100000\r\n\r\n"
              b"--xyz\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk")  # and then nothing
    got = answered_within(s, 15)
    took = time.monotonic() - t0
    assert got is not None and got.startswith(b"HTTP/1.1 400"), got
    assert b"<Code>RequestTimeout</Code>" in got, got
    assert 1.5 < took < 2 + 5, f"answered after {took:.1f} s"
    s.close()


STALLED_FORM = (b"POST /some-bucket HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 100000\r\n\r\n"
                b"--xyz\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk")


def test_stalled_form_posts_that_fill_every_slot_make_way_for_a_new_client(samba):
    # Issue 43, item 2: a request in flight was never evicted, so form
    # POSTs stalled in their fields (nothing authenticated yet) from a few
    # addresses, each within its share, held every connection slot. A
    # request whose body has brought nothing for a second now makes way
    # like an idle connection. 1,000 from one address, and 16 (its share)
    # from each of three more, fill all 64 slots.
    g = Gateway(samba, env={"SMBGATE_MAX_CONNECTIONS": "64"})
    try:
        with flood(g.port, 1000, STALLED_FORM, source="127.0.0.2") as a, \
                flood(g.port, 16, STALLED_FORM, source="127.0.0.3") as b, \
                flood(g.port, 16, STALLED_FORM, source="127.0.0.4") as c, \
                flood(g.port, 16, STALLED_FORM, source="127.0.0.5") as d:
            time.sleep(1.5)  # every slot taken, each request stalled for over a second
            t0 = time.monotonic()
            # Within a few eviction rounds, not the 30 s header timeout.
            got = head_from("127.0.0.6", g.port, 5)
            assert got is not None and got.startswith(b"HTTP/1.1 200"), got
            assert time.monotonic() - t0 < 5
            assert len(a) + len(b) + len(c) + len(d) == 1048
    finally:
        g.stop()


def test_an_ipv6_client_takes_one_share_for_its_whole_slash_64(samba):
    # Issue 43, item 2: the per-client share counted single addresses, and
    # a host is commonly given a whole /64. Thirty connections from thirty
    # addresses of one /64 (routed to loopback for the test) hold only
    # that /64's share; the rest are closed at once.
    import subprocess
    prefix = "fd5b:9a7e:1:2"
    route = ["ip", "-6", "route", "add", "local", f"{prefix}::/64", "dev", "lo", "table", "local"]
    added = subprocess.run(route, capture_output=True, text=True)
    if added.returncode != 0 and "File exists" not in added.stderr:
        pytest.skip(f"no IPv6 on this machine: {added.stderr.strip()}")
    g = Gateway(samba, env={"SMBGATE_MAX_CONNECTIONS": "40", "SMBGATE_HEADER_READ_TIMEOUT": "30"},
                listen_host="[::]")
    socks = []
    try:
        for n in range(1, 31):
            s = socket.socket(socket.AF_INET6)
            s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND: the /64 is routed, not assigned
            s.bind((f"{prefix}::{n:x}", 0))
            s.settimeout(10)
            s.connect(("::1", g.port))
            socks.append(s)
        time.sleep(0.5)
        open_ = still_open_after(socks, 1)
        assert len(open_) == 10, f"{len(open_)} of 30 connections from one /64 kept (its share is 10)"
        got = head_from("127.0.0.3", g.port, 2)
        assert got is not None and got.startswith(b"HTTP/1.1 200"), got
    finally:
        for s in socks:
            s.close()
        g.stop()
        subprocess.run(route[:3] + ["del"] + route[4:], capture_output=True)


def started_get(g, bucket, size):
    """A socket (64 KiB receive buffer) on which a presigned GET of a new
    `size`-byte object `bucket/big.bin` has begun: its status line is read,
    nothing more."""
    import urllib.parse
    s3 = g.client()
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=b"z" * size)
    u = urllib.parse.urlsplit(g.client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "big.bin"}, ExpiresIn=600))
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    c.settimeout(10)
    c.connect(("127.0.0.1", g.port))
    c.sendall(f"GET {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
    assert c.recv(1024).startswith(b"HTTP/1.1 200")
    return c


def reader_gateway(samba, send_timeout):
    """A gateway with `send_timeout` and a read-ahead budget (4 MiB)
    smaller than the objects read, so that a GET keeps its object open
    while its client reads; and a function giving the read-ahead in use
    (bytes, from /metrics)."""
    from test_metrics import value
    mport = _free_port()
    g = Gateway(samba, env={"SMBGATE_SEND_TIMEOUT": send_timeout, "SMBGATE_READ_AHEAD_BUDGET": "4MiB",
                            "SMBGATE_METRICS_LISTEN": f"127.0.0.1:{mport}"})

    def ahead():
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
            return value(r.read().decode(), "smbgate_read_ahead_in_use_bytes")
    return g, ahead


def test_a_get_read_a_kib_every_ten_seconds_is_cut_and_lets_go(own_samba):
    # Issue 43, item 3: a client that reads 1 KiB every 10 s is cut, its
    # object's SMB handle closed and the read-ahead it held given back. A
    # client that holds up its responses must take at least
    # --send-min-rate (1 KiB a second) over each --send-timeout window.
    # (On loopback the kernel lets a full socket take more only once half
    # its send buffer has drained, so here the socket takes nothing in a
    # window and the older rule, nothing taken for a window, would cut it
    # too; the rate itself is shown by conn_limits' unit test.)
    from conftest import open_handles
    g, ahead = reader_gateway(own_samba, "5s")
    try:
        s3 = g.client()
        c = started_get(g, "slow-reader", 64 << 20)
        time.sleep(0.5)
        assert open_handles(own_samba, "big.bin"), "the GET holds the object open"
        assert ahead() > 0, "and read-ahead"
        t0 = time.monotonic()
        taken, cut = 1024, None
        while time.monotonic() - t0 < 60:
            time.sleep(10)
            try:
                b = c.recv(1024)
            except (ConnectionResetError, socket.timeout):
                b = b""
            if not b:
                cut = time.monotonic() - t0
                break
            taken += len(b)
            if not open_handles(own_samba, "big.bin"):
                cut = time.monotonic() - t0
                break
        assert cut is not None, f"still served after {time.monotonic() - t0:.0f} s at 1 KiB per 10 s"
        assert cut <= 30, f"cut after {cut:.0f} s"
        deadline = time.monotonic() + 5
        while (open_handles(own_samba, "big.bin") or ahead() != 0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_handles(own_samba, "big.bin") == []
        assert ahead() == 0, "the read-ahead budget is given back"
        c.close()
        # A client that reads at its own pace, well above the rate, is not cut.
        r = s3.get_object(Bucket="slow-reader", Key="big.bin")["Body"]
        got = 0
        while chunk := r.read(4 << 20):
            got += len(chunk)
        assert got == 64 << 20
    finally:
        g.stop()


def test_http2_streams_given_no_window_are_cut_and_let_go(own_samba):
    # Issue 43, item 3: an HTTP/2 client that opens GETs and never gives
    # them flow-control window blocks no socket write, so no send timeout
    # ran, and each such stream held its object's SMB handle and its
    # read-ahead for as long as the connection lived. A response whose
    # client gives it no room now counts as held up by the client.
    import urllib.parse
    import h2.config
    import h2.connection
    import h2.settings
    from conftest import open_handles
    g, ahead = reader_gateway(own_samba, "3s")
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="no-window")
        for i in range(4):
            s3.put_object(Bucket="no-window", Key=f"big-{i}.bin", Body=b"w" * (32 << 20))
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        c = connect(g)
        c.sendall(conn.data_to_send())
        for i in range(4):
            u = urllib.parse.urlsplit(g.client(signature_version="s3v4").generate_presigned_url(
                "get_object", Params={"Bucket": "no-window", "Key": f"big-{i}.bin"}, ExpiresIn=600))
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", u.netloc),
                                    (":path", f"{u.path}?{u.query}")], end_stream=True)
        c.sendall(conn.data_to_send())
        time.sleep(1)
        held = [h for i in range(4) for h in open_handles(own_samba, f"big-{i}.bin")]
        assert held, "the GETs hold their objects open"
        t0 = time.monotonic()
        closed = closed_within(c, 20)
        took = time.monotonic() - t0
        assert closed, "the connection stayed open with its streams given no window"
        assert took < 3 * 2 + 2, f"cut after {took:.1f} s"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (
                any(open_handles(own_samba, f"big-{i}.bin") for i in range(4)) or ahead() != 0):
            time.sleep(0.2)
        assert [h for i in range(4) for h in open_handles(own_samba, f"big-{i}.bin")] == []
        assert ahead() == 0, "the read-ahead budget is given back"
        c.close()
    finally:
        g.stop()
