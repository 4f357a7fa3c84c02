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


def test_keys_are_case_sensitive_for_files_others_put_on_the_share(s3, bucket, samba):
    # Issue 11, item 25: files written straight onto the share (no record
    # naming their key) answer only to their exact name. Another case is a
    # missing key for GET and HEAD, and DELETE of it deletes nothing.
    from conftest import put_on_share
    put_on_share(samba, bucket, "Readme.TXT", b"native")
    (samba.share_path / bucket / "Docs").mkdir()
    st = samba.share_path.stat()
    import os
    os.chown(samba.share_path / bucket / "Docs", st.st_uid, st.st_gid)
    put_on_share(samba, bucket, "Docs/a.txt", b"nested")
    for key in ["readme.txt", "README.TXT", "docs/a.txt", "Docs/A.txt"]:
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key=key)
        assert _code(e) == ("NoSuchKey", 404), key
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key=key)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, key
        s3.delete_object(Bucket=bucket, Key=key)
    assert (samba.share_path / bucket / "Readme.TXT").read_bytes() == b"native"
    assert (samba.share_path / bucket / "Docs" / "a.txt").read_bytes() == b"nested"
    assert s3.get_object(Bucket=bucket, Key="Readme.TXT")["Body"].read() == b"native"
    assert s3.get_object(Bucket=bucket, Key="Docs/a.txt")["Body"].read() == b"nested"
    s3.delete_object(Bucket=bucket, Key="Readme.TXT")
    assert not (samba.share_path / bucket / "Readme.TXT").exists()
