"""HTTP server limits: a client that never finishes its headers is dropped
after --header-read-timeout, and past --max-connections further clients
wait until a connection closes (they are not served, and cost nothing)."""

import socket
import time

import pytest

from conftest import Gateway
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


@pytest.mark.parametrize("gw", [{"SMBGATE_MAX_CONNECTIONS": "2"}], indirect=True)
def test_past_the_connection_cap_a_client_waits_for_a_free_slot(gw):
    held = [connect(gw), connect(gw)]
    time.sleep(0.3)  # both accepted: the two slots are taken
    waiting = connect(gw)  # the kernel's backlog still accepts the TCP connection
    waiting.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answered_within(waiting, 1.5) is None, "served past the cap"
    held.pop().close()
    got = answered_within(waiting, 5)
    assert got is not None and got.startswith(b"HTTP/1.1 200"), got


def test_post_form_uploads_are_refused_before_their_body_is_read(gateway, bucket):
    """POST Object (an HTML form) is not built: 501 NotImplemented at once,
    though the client has sent only the headers of a large form."""
    import socket
    host, port = gateway.endpoint.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((f"POST /{bucket} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                   "Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 104857600\r\n\r\n").encode())
        got = s.recv(65536).decode(errors="replace")
    assert got.startswith("HTTP/1.1 501"), got
    assert "<Code>NotImplemented</Code>" in got


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
    tmp = gw.samba.share_path / ".smbgate" / "tmp"

    def temp_files():
        return set(p.name for p in tmp.iterdir()) if tmp.exists() else set()

    before = temp_files()
    s3 = gw.client()
    s3.create_bucket(Bucket="stall")
    s3.put_object(Bucket="stall", Key="k", Body=b"old")
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": "stall", "Key": "k"}, ExpiresIn=600)
    u = urllib.parse.urlsplit(url)
    s = connect(gw)
    s.sendall(f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {size + 1}\r\n\r\n".encode())
    s.sendall(b"x" * size)  # one byte short, then nothing
    got = answered_within(s, 30)
    assert got is not None and got.startswith(b"HTTP/1.1 400"), got
    while b"</Error>" not in got:
        more = answered_within(s, 5)
        if not more:
            break
        got += more
    assert b"<Code>RequestTimeout</Code>" in got, got
    s.close()
    assert s3.get_object(Bucket="stall", Key="k")["Body"].read() == b"old"
    deadline = time.monotonic() + 10
    while temp_files() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert temp_files() - before == set()
