"""Abandoned multipart uploads are removed (issue 10, point 4): an upload
neither completed nor aborted within --multipart-expiry (by the server's
clock) disappears with its parts at the next sweep; younger uploads stay."""

import time

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway


@pytest.fixture(scope="module")
def egw(own_samba):
    g = Gateway(own_samba, env={"SMBGATE_MULTIPART_EXPIRY": "4s", "SMBGATE_SWEEP_INTERVAL": "1s"})
    yield g
    g.stop()


def uploads_on_share(samba):
    return sorted(p.name for p in (samba.share_path / ".smbgate" / "uploads").iterdir())


def test_an_abandoned_upload_expires_and_a_young_one_stays(egw, own_samba):
    s3 = egw.client()
    s3.create_bucket(Bucket="exp")
    old = s3.create_multipart_upload(Bucket="exp", Key="old")["UploadId"]
    s3.upload_part(Bucket="exp", Key="old", UploadId=old, PartNumber=1, Body=b"x" * 1000)
    assert uploads_on_share(own_samba) == [old]
    deadline = time.time() + 30
    while old in uploads_on_share(own_samba):
        assert time.time() < deadline, "the expired upload was never removed"
        time.sleep(0.5)
    young = s3.create_multipart_upload(Bucket="exp", Key="young")["UploadId"]
    time.sleep(1.5)  # a sweep or two, well inside the expiry
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="exp").get("Uploads", [])] == [young]
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket="exp", Key="old", UploadId=old, PartNumber=2, Body=b"y")
    assert e.value.response["Error"]["Code"] == "NoSuchUpload"
    s3.abort_multipart_upload(Bucket="exp", Key="young", UploadId=young)


def test_bad_expiry_values_are_refused():
    import os
    import subprocess
    from conftest import smbgate_bin
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    env["SMBGATE_MULTIPART_EXPIRY"] = "soon"
    r = subprocess.run([smbgate_bin(), "serve", "--share", "smb://127.0.0.1:1/x"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "write e.g. 7d, 12h or 30m" in r.stderr, r.stderr
