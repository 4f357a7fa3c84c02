"""CopyObject's own If-None-Match and If-Match on the target (issue 11,
item 23; failure class 25): decided on the share as a PUT's are, so a copy
never replaces what its condition protects."""

from s3util import expect_error


def test_copy_target_conditions(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="src", Body=b"SRC" * 1000)
    etag = s3.put_object(Bucket=bucket, Key="exists", Body=b"ORIGINAL")["ETag"]
    src = {"Bucket": bucket, "Key": "src"}
    expect_error(412, "PreconditionFailed", s3.copy_object, Bucket=bucket, Key="exists", CopySource=src,
                 IfNoneMatch="*")
    expect_error(412, "PreconditionFailed", s3.copy_object, Bucket=bucket, Key="exists", CopySource=src,
                 IfMatch='"00000000000000000000000000000000"')
    assert (samba.share_path / bucket / "exists").read_bytes() == b"ORIGINAL"
    expect_error(404, "NoSuchKey", s3.copy_object, Bucket=bucket, Key="absent", CopySource=src, IfMatch=etag)
    assert not (samba.share_path / bucket / "absent").exists()
    s3.copy_object(Bucket=bucket, Key="exists", CopySource=src, IfMatch=etag)
    assert (samba.share_path / bucket / "exists").read_bytes() == b"SRC" * 1000
    s3.copy_object(Bucket=bucket, Key="new", CopySource=src, IfNoneMatch="*")
    assert (samba.share_path / bucket / "new").read_bytes() == b"SRC" * 1000
