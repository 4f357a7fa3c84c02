"""Issue 11, item 1 (second half): a PUT whose body comes with
`Transfer-Encoding: chunked` and no Content-Length is streamed and
stored. Header-signed with UNSIGNED-PAYLOAD it got 411 on b6bc87b; a
presigned URL already worked. A body signed with its SHA-256 keeps
needing its length (that hash covers an exact length): 411."""

import hashlib
import http.client
import os
from urllib.parse import urlparse

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, REGION, SECRET_KEY
from s3util import md5_etag


def _chunked(gateway, method, path, headers, data, chunk=65_536):
    """Sends data in HTTP/1.1 chunks of `chunk` bytes, with no
    Content-Length; returns (status, headers, body)."""
    u = urlparse(gateway.endpoint)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.putrequest(method, path, skip_accept_encoding=True)
    for k, v in headers.items():
        if k.lower() != "host":
            c.putheader(k, v)
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    try:
        for i in range(0, len(data), chunk):
            piece = data[i:i + chunk]
            c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        c.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused early: its answer is already sent
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def _signed(gateway, method, path, payload_hash):
    req = AWSRequest(method=method, url=gateway.endpoint + path,
                     headers={"x-amz-content-sha256": payload_hash})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    return dict(req.headers.items())


def _presigned(s3, method, params):
    url = urlparse(s3.generate_presigned_url(method, Params=params))
    return url.path + "?" + url.query


DATA = os.urandom(3 * 1024 * 1024 + 12_345)


@pytest.mark.parametrize("signing", ["unsigned-payload", "presigned"])
def test_a_chunked_put_without_content_length_is_stored(s3, gateway, bucket, signing):
    key = f"chunked-{signing}"
    if signing == "presigned":
        path, headers = _presigned(s3, "put_object", {"Bucket": bucket, "Key": key}), {}
    else:
        path = f"/{bucket}/{key}"
        headers = _signed(gateway, "PUT", path, "UNSIGNED-PAYLOAD")
    status, h, body = _chunked(gateway, "PUT", path, headers, DATA)
    assert status == 200, body
    assert h["etag"] == md5_etag(DATA)
    got = s3.get_object(Bucket=bucket, Key=key)
    assert (got["ContentLength"], got["ETag"]) == (len(DATA), md5_etag(DATA))
    assert got["Body"].read() == DATA


def test_a_replayed_put_that_signed_a_zero_length_cannot_carry_a_body(s3, gateway, bucket):
    """An UNSIGNED-PAYLOAD PUT whose signature covers `content-length: 0`
    (captured on its way to an empty object) replayed chunked with a body:
    the gateway must not put its stand-in `Content-Length: 0` back, which
    would make the signature hold for any body (issue 23, point 6.3)."""
    path = f"/{bucket}/replayed"
    req = AWSRequest(method="PUT", url=gateway.endpoint + path,
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD", "Content-Length": "0"})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    headers = {k: v for k, v in req.headers.items() if k.lower() != "content-length"}
    assert "content-length" in headers["Authorization"].split("SignedHeaders=")[1].split(",")[0]
    status, _, body = _chunked(gateway, "PUT", path, headers, b"not what was signed")
    assert status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body, (status, body)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_chunked_put_signed_with_its_sha256_needs_its_length(s3, gateway, bucket):
    path = f"/{bucket}/chunked-sha"
    headers = _signed(gateway, "PUT", path, hashlib.sha256(DATA).hexdigest())
    status, _, body = _chunked(gateway, "PUT", path, headers, DATA)
    assert status == 411 and b"<Code>MissingContentLength</Code>" in body, (status, body)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_chunked_upload_part_without_content_length_is_stored(s3, gateway, bucket):
    key = "chunked-mp"
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    first, last = os.urandom(5 * 1024 * 1024), os.urandom(1000)
    etags = []
    for n, part in ((1, first), (2, last)):
        path = f"/{bucket}/{key}?partNumber={n}&uploadId={up}"
        status, h, body = _chunked(gateway, "PUT", path, _signed(gateway, "PUT", path, "UNSIGNED-PAYLOAD"), part)
        assert status == 200, body
        assert h["etag"] == md5_etag(part)
        etags.append(h["etag"])
    parts = [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == first + last
