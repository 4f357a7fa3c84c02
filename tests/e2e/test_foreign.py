"""Files other people put on the share (no metadata record of ours) list,
HEAD and GET with one stable ETag, marked as not an MD5."""

import hashlib
import os


def test_foreign_file_etag_is_stable_and_consistent(s3, bucket, samba):
    d = samba.share_path / bucket / "from-explorer"
    d.mkdir()
    body = os.urandom(5000)
    (d / "report.bin").write_bytes(body)
    os.chown(d, samba.share_path.stat().st_uid, samba.share_path.stat().st_gid)
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == ["from-explorer/report.bin"]
    etag = listed[0]["ETag"]
    assert etag.endswith('-1"') and etag != '"%s"' % hashlib.md5(body).hexdigest()
    head = s3.head_object(Bucket=bucket, Key="from-explorer/report.bin")
    assert head["ETag"] == etag
    got = s3.get_object(Bucket=bucket, Key="from-explorer/report.bin")
    assert got["ETag"] == etag and got["Body"].read() == body
    # Stable across calls; changes when the file changes.
    assert s3.list_objects_v2(Bucket=bucket)["Contents"][0]["ETag"] == etag
    (d / "report.bin").write_bytes(body + b"more")
    assert s3.head_object(Bucket=bucket, Key="from-explorer/report.bin")["ETag"] != etag
