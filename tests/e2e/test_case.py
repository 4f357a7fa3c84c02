"""Keys that differ only in case on a case-insensitive share (Samba's and
Windows' default) are refused with 409, never silently merged."""

import pytest
from botocore.exceptions import ClientError


def _code(e):
    return e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_case_only_variant_of_an_object_is_refused(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="Report.txt", Body=b"upper")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="report.txt", Body=b"lower")
    assert _code(e) == ("KeyConflict", 409)
    assert s3.get_object(Bucket=bucket, Key="Report.txt")["Body"].read() == b"upper"
    assert [p.name for p in (samba.share_path / bucket).iterdir()] == ["Report.txt"]


def test_case_only_variant_of_a_directory_is_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Photos/a.jpg", Body=b"a")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="photos/b.jpg", Body=b"b")
    assert _code(e) == ("KeyConflict", 409)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["Photos/a.jpg"]


def test_same_case_overwrite_still_works(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Dir/Name", Body=b"1")
    s3.put_object(Bucket=bucket, Key="Dir/Name", Body=b"2")
    assert s3.get_object(Bucket=bucket, Key="Dir/Name")["Body"].read() == b"2"
