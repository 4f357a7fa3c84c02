"""SigV4 details S3 clients rely on, sent by hand so each variant is
exercised: clock skew, signed aws-chunked bodies (per-chunk signatures) and
unsigned aws-chunked bodies with a checksum trailer."""

import base64
import datetime
import hashlib
import hmac
import http.client
import os
import urllib.request
import zlib
from unittest import mock
from urllib.parse import urlparse

import pytest

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, REGION, SECRET_KEY

EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def _send(gateway, method, path, headers, body=b""):
    u = urlparse(gateway.endpoint)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def _signed_headers(gateway, method, path, headers, when=None):
    req = AWSRequest(method=method, url=gateway.endpoint + path, headers=dict(headers))
    auth = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION)
    if when is None:
        auth.add_auth(req)
    else:
        # botocore stamps the request with its own clock; give it ours.
        naive = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
            auth.add_auth(req)
    return dict(req.headers.items())


def _key(date):
    k = hmac.new(("AWS4" + SECRET_KEY).encode(), date.encode(), hashlib.sha256).digest()
    for part in (REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def test_clock_skew_is_request_time_too_skewed(gateway, bucket):
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=30)
    h = _signed_headers(gateway, "GET", f"/{bucket}?list-type=2",
                        {"x-amz-content-sha256": EMPTY_SHA}, when=past)
    status, body = _send(gateway, "GET", f"/{bucket}?list-type=2", h)
    assert status == 403, body
    assert b"<Code>RequestTimeTooSkewed</Code>" in body
    assert b"<ServerTime>" in body
    # As AWS answers (issue 23, point 7): the request's own time as it was
    # sent, and the skew allowed.
    assert f"<RequestTime>{h['X-Amz-Date']}</RequestTime>".encode() in body, body
    assert b"<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>" in body


def _chunked_signed(gateway, path, data, chunk=64 * 1024, corrupt=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    sig_len = 64
    enc_len = sum(len("%x" % len(c)) + len(";chunk-signature=") + sig_len + 4 + len(c) for c in chunks)
    headers = {
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "content-length": str(enc_len),
        "x-amz-date": amz_date,
    }
    h = _signed_headers(gateway, "PUT", path, headers, when=now)
    prev = h["Authorization"].split("Signature=")[1]
    key = _key(date)
    scope = f"{date}/{REGION}/s3/aws4_request"
    out = b""
    for i, c in enumerate(chunks):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA,
                         hashlib.sha256(c).hexdigest()])
        sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        prev = sig
        payload = c
        if corrupt and i == 1:
            payload = bytes([c[0] ^ 1]) + c[1:]
        out += b"%x;chunk-signature=%s\r\n%s\r\n" % (len(c), sig.encode(), payload)
    return _send(gateway, "PUT", path, h, out)


def test_signed_aws_chunked_put(s3, gateway, bucket):
    data = os.urandom(300 * 1024 + 17)
    status, body = _chunked_signed(gateway, f"/{bucket}/chunked", data)
    assert status == 200, body
    got = s3.get_object(Bucket=bucket, Key="chunked")
    assert got["Body"].read() == data
    assert got["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()


def test_signed_aws_chunked_put_with_a_bad_chunk_is_refused(s3, gateway, bucket):
    data = os.urandom(200 * 1024)
    status, body = _chunked_signed(gateway, f"/{bucket}/bad-chunk", data, corrupt=True)
    assert status == 403, body
    assert b"SignatureDoesNotMatch" in body
    keys = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert keys == []


def _unsigned_trailer(gateway, path, data, crc_b64, trailer=None):
    """An unsigned aws-chunked PUT announcing a CRC32 trailer; `trailer`
    (bytes) replaces the trailer lines sent (b"" sends none)."""
    if trailer is None:
        trailer = f"x-amz-checksum-crc32:{crc_b64}\r\n".encode()
    body = b"%x\r\n%s\r\n0\r\n%s\r\n" % (len(data), data, trailer)
    headers = {
        "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "content-length": str(len(body)),
    }
    h = _signed_headers(gateway, "PUT", path, headers)
    return _send(gateway, "PUT", path, h, body)


def _crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def test_unsigned_chunked_with_checksum_trailer(s3, gateway, bucket):
    data = os.urandom(100_000)
    status, body = _unsigned_trailer(gateway, f"/{bucket}/trailer", data, _crc32_b64(data))
    assert status == 200, body
    head = s3.head_object(Bucket=bucket, Key="trailer", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == _crc32_b64(data)
    assert s3.get_object(Bucket=bucket, Key="trailer")["Body"].read() == data


def test_unsigned_chunked_with_a_wrong_trailer_is_bad_digest(s3, gateway, bucket, samba):
    data = os.urandom(100_000)
    status, body = _unsigned_trailer(gateway, f"/{bucket}/bad-trailer", data, _crc32_b64(b"other"))
    assert status == 400, body
    assert b"<Code>BadDigest</Code>" in body
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert not list((samba.share_path / bucket).iterdir())


# Issue 43, item 4: s3s reads an aws-chunked chunk whole before checking
# its signature, whatever size its line claims. A chunk over the declared
# decoded length, or over 16 MiB, is refused at its size line.
@pytest.mark.parametrize("claim", [64 << 30, 512 << 20], ids=["over-the-decoded-length", "over-16-MiB"])
def test_a_chunk_claiming_more_than_allowed_is_refused_without_being_held(samba, claim):
    import socket
    from conftest import Gateway
    from s3util import peak_rss_mib, send_zeros
    g = Gateway(samba)
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="chunks")
        decoded = 1 << 30
        now = datetime.datetime.now(datetime.timezone.utc)
        headers = {
            "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(decoded),
            "content-length": str(decoded + 8192),
            "x-amz-date": now.strftime("%Y%m%dT%H%M%SZ"),
        }
        h = _signed_headers(g, "PUT", "/chunks/big", headers, when=now)
        head = "".join(f"{k}: {v}\r\n" for k, v in h.items())
        open(f"/proc/{g.proc.pid}/clear_refs", "w").write("5")
        before = peak_rss_mib(g.proc.pid)
        s = socket.create_connection(("127.0.0.1", g.port), timeout=30)
        s.sendall(f"PUT /chunks/big HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\n{head}\r\n".encode()
                  + b"%x;chunk-signature=%s\r\n" % (claim, b"0" * 64))
        t, sent = send_zeros(s, 256 << 20)
        s.settimeout(30)
        got = b""
        try:
            while b"</Error>" not in got:
                more = s.recv(65536)
                if not more:
                    break
                got += more
        except socket.timeout:
            pass
        s.close()
        t.join(10)
        assert got.startswith(b"HTTP/1.1 400"), got[:300]
        assert b"<Code>InvalidChunkSizeError</Code>" in got, got
        grew = peak_rss_mib(g.proc.pid) - before
        assert grew < 32, f"the gateway's peak RSS grew by {grew:.0f} MiB ({sent[0] >> 20} MiB sent)"
        assert s3.list_objects_v2(Bucket="chunks").get("KeyCount") == 0
    finally:
        g.stop()


# Issue 43, item 5: whatever SMBGATE_LOG asks of s3s, no signature, and no
# Authorization header, reaches the log.
def test_s3s_at_trace_logs_no_signature(samba):
    import re
    import time
    from pathlib import Path
    import botocore.exceptions
    from conftest import Gateway
    g = Gateway(samba, env={"SMBGATE_LOG": "info,s3s=trace"})
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="logs")
        s3.put_object(Bucket="logs", Key="k", Body=b"x" * 1000)
        url = s3.generate_presigned_url("get_object", Params={"Bucket": "logs", "Key": "k"})
        with urllib.request.urlopen(url) as r:
            assert r.read() == b"x" * 1000
        try:
            g.client(secret_key="not-the-secret").list_objects_v2(Bucket="logs")
            raise AssertionError("a wrong secret was accepted")
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "SignatureDoesNotMatch"
        status, body = _chunked_signed(g, "/logs/chunked", os.urandom(100_000))
        assert status == 200, body
        time.sleep(0.5)
        log = Path(g.log.name).read_text()
        assert "taking streaming blob" in log, "s3s's other DEBUG events are logged as asked"
        found = re.findall(r"[0-9a-f]{64}", log)
        assert found == [], f"the log holds {len(found)} signature-like values, e.g. {found[:2]}"
        assert "Signature=" not in log and "X-Amz-Signature" not in log and "chunk-signature" not in log
    finally:
        g.stop()
