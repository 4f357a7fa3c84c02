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


def test_hundreds_of_parts_complete_where_extended_attributes_are_small(s3, bucket, samba):
    """Issue 23, point 6.8: a completed object's record held one size per
    part, and with a checksum one checksum per part; on an ext4-backed Samba
    an extended attribute holds about 4 KB, so 600 parts (3 GB in 5 MiB
    parts, or an aws-cli upload of 4.8 GB) failed with 500
    (STATUS_DISK_FULL). Part sizes are now kept as runs, and a record still
    too large is written without the parts' checksums: the upload
    completes, partNumber reads work, and the whole object's checksum
    stays. The parts are server-side copies, so the test moves no data."""
    n = 600
    s3.put_object(Bucket=bucket, Key="src", Body=b"p" * (5 << 20))
    up = s3.create_multipart_upload(Bucket=bucket, Key="big", ChecksumAlgorithm="CRC32")["UploadId"]
    parts = []
    for i in range(1, n + 1):
        r = s3.upload_part_copy(Bucket=bucket, Key="big", UploadId=up, PartNumber=i,
                                CopySource={"Bucket": bucket, "Key": "src"})["CopyPartResult"]
        parts.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
    done = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=up, MultipartUpload={"Parts": parts})
    assert done["ETag"].endswith(f'-{n}"') and done["ChecksumCRC32"].endswith(f"-{n}")
    h = s3.head_object(Bucket=bucket, Key="big", ChecksumMode="ENABLED")
    assert (h["ETag"], h["ContentLength"], h["ChecksumCRC32"]) == (done["ETag"], n * (5 << 20), done["ChecksumCRC32"])
    p = s3.head_object(Bucket=bucket, Key="big", PartNumber=n)
    assert (p["ContentLength"], p["PartsCount"]) == (5 << 20, n)
    record = os.getxattr(samba.share_path / bucket / "big", "user.smbgate.meta")
    assert b'"part_runs":[[5242880,600]]' in record, record[:300]
    s3.delete_object(Bucket=bucket, Key="big")
