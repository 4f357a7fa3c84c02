"""Smoke test: the basic object round trip through boto3, checked on the share."""

import hashlib


def test_put_get_list_delete(s3, bucket, samba):
    body = b"hello smbgate\n" * 1000
    r = s3.put_object(Bucket=bucket, Key="dir/hello.txt", Body=body, ContentType="text/plain")
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    got = s3.get_object(Bucket=bucket, Key="dir/hello.txt")
    assert got["Body"].read() == body
    assert got["ContentType"] == "text/plain"
    assert (samba.share_path / bucket / "dir" / "hello.txt").read_bytes() == body
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["dir/hello.txt"]
    s3.delete_object(Bucket=bucket, Key="dir/hello.txt")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
