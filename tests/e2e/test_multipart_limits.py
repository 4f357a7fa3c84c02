"""S3's size limits, enforced before a byte is stored: a part or a single
PUT over 5 GiB is 400 EntityTooLarge (answered from the declared
Content-Length, before the body is read), and what was already uploaded
stays as it was."""

import os
import socket
from urllib.parse import urlparse

import pytest

SIX_GIB = 6 << 30


def declare_and_send_little(url, length):
    """PUTs to a presigned `url` declaring Content-Length `length` but sending
    only 1 KiB; returns the status line and body of the answer."""
    u = urlparse(url)
    path = u.path + ("?" + u.query if u.query else "")
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall((f"PUT {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                   f"Content-Length: {length}\r\n\r\n").encode() + b"x" * 1024)
        data = b""
        while b"</Error>" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body.decode(errors="replace")


# 2^63 does not even parse as a Content-Length (s3s answers InvalidArgument).
@pytest.mark.parametrize("length,code", [(SIX_GIB, "EntityTooLarge"), (1 << 63, "InvalidArgument")])
def test_a_part_over_5_gib_is_refused_and_the_upload_is_unchanged(s3, bucket, length, code):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    part1 = os.urandom(5 << 20)
    e1 = s3.upload_part(Bucket=bucket, Key="big", UploadId=uid, PartNumber=1, Body=part1)["ETag"]
    url = s3.generate_presigned_url("upload_part", Params={"Bucket": bucket, "Key": "big", "UploadId": uid,
                                                           "PartNumber": 2})
    status_line, body = declare_and_send_little(url, length)
    assert status_line == "HTTP/1.1 400 Bad Request", (status_line, body)
    assert f"<Code>{code}</Code>" in body, body
    parts = s3.list_parts(Bucket=bucket, Key="big", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, e1, 5 << 20)]
    s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=uid,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})
    assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == part1


def test_a_single_put_over_5_gib_is_entity_too_large_and_stores_nothing(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="k", Body=b"old")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "k"})
    status_line, body = declare_and_send_little(url, SIX_GIB)
    assert status_line == "HTTP/1.1 400 Bad Request", (status_line, body)
    assert "<Code>EntityTooLarge</Code>" in body, body
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"old"
