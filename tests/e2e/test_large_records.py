"""Issue 41, point 2: an object at AWS's limits, 2 KB of user metadata
and 10 tags of 128 + 256 characters together, is one record of about
6 KB, over the ~4 KiB of extended attributes ext4 keeps for a file (and
streams_xattr keeps streams in them too). Such a record goes to a sidecar
under `.smbgate/meta` and its EA or stream keeps a stub; every read finds
the whole record, on EA, stream and sidecar shares alike."""

import hashlib
import json
import os
import time
import uuid

import pytest

from conftest import Gateway, Samba

KINDS = {
    "eas": [],
    "streams": ["ea support = no", "vfs objects = streams_xattr"],
    "sidecars": ["ea support = no"],
}

META = {f"m{i}": "v" * 190 for i in range(10)}
TAGS = [(f"{'k' * 120}{i}", "v" * 250) for i in range(10)]
TAGGING = "&".join(f"{k}={v}" for k, v in TAGS)


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind(request):
    s = Samba(*[a for o in KINDS[request.param] for a in ("--share-option", o)])
    g = Gateway(s)
    yield g, s, request.param
    g.stop()
    s.stop()


def tag_set(s3, bucket, key):
    return [(t["Key"], t["Value"]) for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]]


def test_an_object_at_aws_limits_keeps_every_field(kind):
    g, samba, name = kind
    s3 = g.client()
    bucket = f"big-{name}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for key, body in (("small", b"x" * 10), ("streamed", os.urandom(20 << 20))):
        r = s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata=META, Tagging=TAGGING, ContentType="text/x-big")
        assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
        got = s3.get_object(Bucket=bucket, Key=key)
        assert (got["Body"].read(), got["Metadata"], got["ContentType"], got["TagCount"]) == \
            (body, META, "text/x-big", 10), key
        assert tag_set(s3, bucket, key) == sorted(TAGS)
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["ETag"]) for o in listed] == [
        ("small", '"%s"' % hashlib.md5(b"x" * 10).hexdigest()),
        ("streamed", s3.head_object(Bucket=bucket, Key="streamed")["ETag"])]
    if name == "eas":
        # On the share: a stub in the EA, the record in a sidecar.
        stub = json.loads(os.getxattr(samba.share_path / bucket / "small", "user.smbgate.meta"))
        assert (stub["spilled"], "user" in stub, "tags" in stub, stub["size"]) == (True, False, False, 10)
    # An object holding the metadata takes the tags afterwards, and a copy
    # keeps both.
    s3.put_object(Bucket=bucket, Key="held", Body=b"kept", Metadata=META)
    s3.put_object_tagging(Bucket=bucket, Key="held", Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in TAGS]})
    assert tag_set(s3, bucket, "held") == sorted(TAGS)
    got = s3.get_object(Bucket=bucket, Key="held")
    assert (got["Body"].read(), got["Metadata"]) == (b"kept", META)
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "held"})
    got = s3.get_object(Bucket=bucket, Key="copy")
    assert (got["Body"].read(), got["Metadata"], got["TagCount"]) == (b"kept", META, 10)
    # A multipart upload carries them to its object.
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Metadata=META, Tagging=TAGGING)["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=b"p" * 100)
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    head = s3.head_object(Bucket=bucket, Key="mp")
    assert (head["Metadata"], head["ContentLength"]) == (META, 100)
    assert tag_set(s3, bucket, "mp") == sorted(TAGS)
    # Removing the tags makes the record small again.
    s3.delete_object_tagging(Bucket=bucket, Key="held")
    assert s3.get_object(Bucket=bucket, Key="held")["Metadata"] == META


def test_a_deleted_objects_sidecar_goes_too(kind):
    g, samba, name = kind
    s3 = g.client()
    bucket = f"gone-{name}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"b", Metadata=META, Tagging=TAGGING)
    # Named after the file's on-disk id (its inode on Samba).
    ino = (samba.share_path / bucket / "k").stat().st_ino
    sidecar = samba.share_path / ".smbgate" / "meta" / f"{ino & 0xff:02x}" / f"{ino:016x}"
    assert json.loads(sidecar.read_text())["id"] == ino
    s3.delete_object(Bucket=bucket, Key="k")
    deadline = time.monotonic() + 20
    while sidecar.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not sidecar.exists()


def sidecar_files(samba):
    return {p for p in (samba.share_path / ".smbgate" / "meta").rglob("*") if p.is_file()}


def test_an_uploads_spilled_record_goes_with_the_upload(kind):
    """The upload's record (the object's metadata and tags to come) spills
    like the object's; completing or aborting the upload removes it."""
    g, samba, name = kind
    s3 = g.client()
    bucket = f"up-{name}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    before = sidecar_files(samba)
    up = s3.create_multipart_upload(Bucket=bucket, Key="done", Metadata=META, Tagging=TAGGING)["UploadId"]
    gone = s3.create_multipart_upload(Bucket=bucket, Key="aborted", Metadata=META, Tagging=TAGGING)["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="done", UploadId=up, PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(Bucket=bucket, Key="done", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=gone)
    ino = (samba.share_path / bucket / "done").stat().st_ino
    want = before | {samba.share_path / ".smbgate" / "meta" / f"{ino & 0xff:02x}" / f"{ino:016x}"}
    deadline = time.monotonic() + 20
    while sidecar_files(samba) != want and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sidecar_files(samba) == want
