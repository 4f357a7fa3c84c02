"""Bucket versioning (issue 39, point 1) against real Samba through boto3:
the versioning state, version IDs on writes and reads, older versions kept
by rename under the bucket's `.smbgate/versions/` state, delete markers,
deletes by version ID, suspended buckets, and ListObjectVersions with its
markers, prefixes and pages. The current version stays the plain file at
the key's path, which the tests read on the share itself."""

import hashlib
import time
import uuid

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import Gateway, open_handles


def enable(s3, bucket, status="Enabled"):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


@pytest.fixture
def vbucket(s3):
    return new_versioned_bucket(s3)


def err(e):
    return e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def headers(e):
    return e.value.response["ResponseMetadata"]["HTTPHeaders"]


def new_versioned_bucket(s3):
    """A bucket of a fresh name with versioning enabled, through `s3`."""
    name = f"v-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    enable(s3, name)
    return name


def versions_of(s3, bucket, **kw):
    """(key, version ID, is latest, is marker) of every entry, in order."""
    r = s3.list_object_versions(Bucket=bucket, **kw)
    out = [(v["Key"], v["VersionId"], v["IsLatest"], False, v["ETag"]) for v in r.get("Versions", [])]
    out += [(m["Key"], m["VersionId"], m["IsLatest"], True, None) for m in r.get("DeleteMarkers", [])]
    return r, out


def stored_files(samba, bucket, key):
    """The files of `key`'s stored versions on the share, by name."""
    d = samba.share_path / ".smbgate" / "versions" / bucket / key / ".smbgate"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_versioning_state_reads_back_and_refuses_bad_documents(s3, bucket):
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    with pytest.raises(ClientError) as e:
        enable(s3, bucket, "On")
    assert err(e) == ("MalformedXML", 400)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_versioning(Bucket=f"nope-{uuid.uuid4().hex[:8]}")
    assert err(e) == ("NoSuchBucket", 404)


def test_overwrites_keep_older_versions_by_their_ids(s3, vbucket, samba):
    first = s3.put_object(Bucket=vbucket, Key="dir/k.txt", Body=b"one")
    second = s3.put_object(Bucket=vbucket, Key="dir/k.txt", Body=b"two!")
    v1, v2 = first["VersionId"], second["VersionId"]
    assert v1 != v2 and len(v1) == 24 and v2 < v1, (v1, v2)
    got = s3.get_object(Bucket=vbucket, Key="dir/k.txt")
    assert (got["Body"].read(), got["VersionId"]) == (b"two!", v2)
    old = s3.get_object(Bucket=vbucket, Key="dir/k.txt", VersionId=v1)
    assert old["Body"].read() == b"one"
    assert old["ETag"] == f'"{hashlib.md5(b"one").hexdigest()}"' and old["VersionId"] == v1
    head = s3.head_object(Bucket=vbucket, Key="dir/k.txt", VersionId=v1)
    assert (head["ContentLength"], head["VersionId"]) == (3, v1)
    ranged = s3.get_object(Bucket=vbucket, Key="dir/k.txt", VersionId=v1, Range="bytes=1-")
    assert ranged["Body"].read() == b"ne"
    # On the share: the current version at the key's path, the older one
    # kept under the bucket's state.
    assert (samba.share_path / vbucket / "dir" / "k.txt").read_bytes() == b"two!"
    kept = stored_files(samba, vbucket, "dir/k.txt")
    assert len(kept) == 1 and kept[0].endswith("." + v1), kept
    path = samba.share_path / ".smbgate/versions" / vbucket / "dir/k.txt/.smbgate" / kept[0]
    assert path.read_bytes() == b"one"
    _, listed = versions_of(s3, vbucket)
    assert [(k, v, latest, m) for k, v, latest, m, _ in listed] == [
        ("dir/k.txt", v2, True, False), ("dir/k.txt", v1, False, False)]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=vbucket, Key="dir/k.txt", VersionId="0" * 24)
    assert err(e) == ("NoSuchVersion", 404)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=vbucket, Key="dir/k.txt", VersionId="../x")
    assert err(e) == ("InvalidArgument", 400)


def test_a_delete_adds_a_marker_and_deleting_the_marker_brings_the_key_back(s3, vbucket, samba):
    v1 = s3.put_object(Bucket=vbucket, Key="k", Body=b"kept")["VersionId"]
    d = s3.delete_object(Bucket=vbucket, Key="k")
    marker = d["VersionId"]
    assert d["DeleteMarker"] is True and marker != v1
    assert not (samba.share_path / vbucket / "k").exists()
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=vbucket, Key="k")
    assert err(e) == ("NoSuchKey", 404)
    assert headers(e)["x-amz-delete-marker"] == "true"
    assert headers(e)["x-amz-version-id"] == marker
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=vbucket, Key="k", VersionId=marker)
    assert err(e) == ("MethodNotAllowed", 405)
    assert headers(e)["x-amz-delete-marker"] == "true"
    assert "k" not in [o["Key"] for o in s3.list_objects_v2(Bucket=vbucket).get("Contents", [])]
    _, listed = versions_of(s3, vbucket)
    assert sorted((v, latest, m) for _, v, latest, m, _ in listed) == sorted(
        [(marker, True, True), (v1, False, False)])
    # Removing the marker by its ID makes the version before it current.
    gone = s3.delete_object(Bucket=vbucket, Key="k", VersionId=marker)
    assert gone["VersionId"] == marker and gone["DeleteMarker"] is True
    got = s3.get_object(Bucket=vbucket, Key="k")
    assert (got["Body"].read(), got["VersionId"]) == (b"kept", v1)
    assert (samba.share_path / vbucket / "k").read_bytes() == b"kept"
    assert stored_files(samba, vbucket, "k") == []


def test_deleting_a_version_by_id_removes_exactly_it(s3, vbucket, samba):
    ids = [s3.put_object(Bucket=vbucket, Key="k", Body=f"v{i}".encode())["VersionId"] for i in range(3)]
    # The middle one: the current stays.
    r = s3.delete_object(Bucket=vbucket, Key="k", VersionId=ids[1])
    assert r["VersionId"] == ids[1] and "DeleteMarker" not in r
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=vbucket, Key="k", VersionId=ids[1])
    assert err(e)[1] == 404
    # The current one: the newest left becomes current.
    s3.delete_object(Bucket=vbucket, Key="k", VersionId=ids[2])
    got = s3.get_object(Bucket=vbucket, Key="k")
    assert (got["Body"].read(), got["VersionId"]) == (b"v0", ids[0])
    # The last one: the key is gone, with no marker.
    s3.delete_object(Bucket=vbucket, Key="k", VersionId=ids[0])
    _, listed = versions_of(s3, vbucket)
    assert listed == []
    assert not (samba.share_path / vbucket / "k").exists()
    # A version that is not there: success, as on AWS.
    assert s3.delete_object(Bucket=vbucket, Key="k", VersionId=ids[0])["VersionId"] == ids[0]
    # With nothing left, the bucket can go.
    s3.delete_bucket(Bucket=vbucket)


def test_deleting_the_current_version_while_a_get_streams_it_brings_the_older_one_back(samba):
    """A GET still reading the current file holds it open (here a gateway
    that reads little ahead, so the GET's handle stays open while its client
    waits), so deleting it in place would leave its name delete pending
    until that GET ends. The older version must be current at once all the
    same, and nothing of the deleted version may stay. (The GET itself is
    cut once its next segment finds the file gone, as for any object
    replaced or deleted under a large GET: reads/stream.rs.)"""
    g = Gateway(samba, env={"SMBGATE_READ_AHEAD_BUDGET": "1MiB"})
    try:
        s3 = g.client()
        bucket = new_versioned_bucket(s3)
        old = s3.put_object(Bucket=bucket, Key="k", Body=b"old")["VersionId"]
        body = bytes(range(256)) * (128 << 10)  # 32 MiB: more than sockets buffer
        new = s3.put_object(Bucket=bucket, Key="k", Body=body)["VersionId"]
        reading = s3.get_object(Bucket=bucket, Key="k", VersionId=new)["Body"]
        first = reading.read(1 << 20)
        assert open_handles(samba, f"{bucket}/k"), "the GET holds the file"
        r = s3.delete_object(Bucket=bucket, Key="k", VersionId=new)
        assert (r["ResponseMetadata"]["HTTPStatusCode"], r["VersionId"]) == (204, new)
        got = s3.get_object(Bucket=bucket, Key="k")
        assert (got["Body"].read(), got["VersionId"]) == (b"old", old)
        _, listed = versions_of(s3, bucket)
        assert [(k, v, latest, marker) for k, v, latest, marker, _ in listed] == [("k", old, True, False)]
        assert first == body[: 1 << 20]
        reading.close()
        assert (samba.share_path / bucket / "k").read_bytes() == b"old"
        assert stored_files(samba, bucket, "k") == []
    finally:
        g.stop()


def test_a_bucket_with_stored_versions_is_not_empty(s3, vbucket):
    v = s3.put_object(Bucket=vbucket, Key="k", Body=b"x")["VersionId"]
    s3.delete_object(Bucket=vbucket, Key="k")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=vbucket)
    assert err(e) == ("BucketNotEmpty", 409)
    _, listed = versions_of(s3, vbucket)
    for _, vid, _, _, _ in listed:
        s3.delete_object(Bucket=vbucket, Key="k", VersionId=vid)
    assert v in [x[1] for x in listed]
    s3.delete_bucket(Bucket=vbucket)


def test_objects_from_before_versioning_are_the_null_version(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="old", Body=b"before")
    assert "VersionId" not in s3.head_object(Bucket=bucket, Key="old")
    enable(s3, bucket)
    assert s3.head_object(Bucket=bucket, Key="old")["VersionId"] == "null"
    new = s3.put_object(Bucket=bucket, Key="old", Body=b"after")["VersionId"]
    assert s3.get_object(Bucket=bucket, Key="old", VersionId="null")["Body"].read() == b"before"
    _, listed = versions_of(s3, bucket)
    assert [(v, latest) for _, v, latest, _, _ in listed] == [(new, True), ("null", False)]


def test_suspended_buckets_replace_the_null_version_and_keep_the_others(s3, vbucket):
    v1 = s3.put_object(Bucket=vbucket, Key="k", Body=b"enabled")["VersionId"]
    enable(s3, vbucket, "Suspended")
    assert s3.put_object(Bucket=vbucket, Key="k", Body=b"null one")["VersionId"] == "null"
    assert s3.put_object(Bucket=vbucket, Key="k", Body=b"null two")["VersionId"] == "null"
    _, listed = versions_of(s3, vbucket)
    assert [(v, latest) for _, v, latest, _, _ in listed] == [("null", True), (v1, False)]
    assert s3.get_object(Bucket=vbucket, Key="k")["Body"].read() == b"null two"
    # A delete makes a null marker, replacing the null version.
    d = s3.delete_object(Bucket=vbucket, Key="k")
    assert (d["DeleteMarker"], d["VersionId"]) == (True, "null")
    _, listed = versions_of(s3, vbucket)
    assert [(v, latest, m) for _, v, latest, m, _ in listed] == [(v1, False, False), ("null", True, True)]
    assert s3.get_object(Bucket=vbucket, Key="k", VersionId=v1)["Body"].read() == b"enabled"


def test_multipart_copy_and_conditional_writes_keep_versions(s3, vbucket):
    v1 = s3.put_object(Bucket=vbucket, Key="k", Body=b"first")["VersionId"]
    up = s3.create_multipart_upload(Bucket=vbucket, Key="k")["UploadId"]
    part = s3.upload_part(Bucket=vbucket, Key="k", UploadId=up, PartNumber=1, Body=b"multi")
    done = s3.complete_multipart_upload(
        Bucket=vbucket, Key="k", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    v2 = done["VersionId"]
    assert v2 != v1 and s3.head_object(Bucket=vbucket, Key="k")["VersionId"] == v2
    copied = s3.copy_object(Bucket=vbucket, Key="c", CopySource={"Bucket": vbucket, "Key": "k"})
    assert s3.head_object(Bucket=vbucket, Key="c")["VersionId"] == copied["VersionId"]
    etag = s3.head_object(Bucket=vbucket, Key="k")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=vbucket, Key="k", Body=b"x", IfMatch='"0123"')
    assert err(e) == ("PreconditionFailed", 412)
    v3 = s3.put_object(Bucket=vbucket, Key="k", Body=b"third", IfMatch=etag)["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=vbucket, Key="k", Body=b"x", IfNoneMatch="*")
    assert err(e) == ("PreconditionFailed", 412)
    _, listed = versions_of(s3, vbucket, Prefix="k")
    assert [v for _, v, _, _, _ in listed] == [v3, v2, v1]
    assert s3.get_object(Bucket=vbucket, Key="k", VersionId=v2)["Body"].read() == b"multi"


def test_delete_objects_with_and_without_version_ids(s3, vbucket):
    a1 = s3.put_object(Bucket=vbucket, Key="a", Body=b"a1")["VersionId"]
    a2 = s3.put_object(Bucket=vbucket, Key="a", Body=b"a2")["VersionId"]
    b = s3.put_object(Bucket=vbucket, Key="b", Body=b"b")["VersionId"]
    r = s3.delete_objects(Bucket=vbucket, Delete={"Objects": [
        {"Key": "a", "VersionId": a1}, {"Key": "b"}, {"Key": "a", "VersionId": "bad/id"}]})
    deleted = {(d["Key"], d.get("VersionId")): d for d in r["Deleted"]}
    assert deleted[("a", a1)].get("DeleteMarker") is None
    assert deleted[("b", None)]["DeleteMarker"] is True
    marker = deleted[("b", None)]["DeleteMarkerVersionId"]
    assert [(x["Key"], x["Code"], x.get("VersionId")) for x in r["Errors"]] == [("a", "InvalidArgument", "bad/id")]
    r = s3.delete_objects(Bucket=vbucket, Delete={"Objects": [{"Key": "b", "VersionId": marker}], "Quiet": True})
    assert "Deleted" not in r or r["Deleted"] == []
    assert s3.get_object(Bucket=vbucket, Key="b")["Body"].read() == b"b"
    _, listed = versions_of(s3, vbucket)
    assert [(k, v, latest, m) for k, v, latest, m, _ in listed] == [("a", a2, True, False), ("b", b, True, False)]


def test_list_object_versions_pages_prefixes_and_markers(s3, vbucket):
    expected = []
    for key in ["a/1", "a/2", "b", "c/d/e"]:
        ids = [s3.put_object(Bucket=vbucket, Key=key, Body=f"{key}{i}".encode())["VersionId"] for i in range(2)]
        expected += [(key, ids[1]), (key, ids[0])]
    m = s3.delete_object(Bucket=vbucket, Key="b")["VersionId"]
    expected.insert(expected.index(("b", [v for k, v in expected if k == "b"][0])), ("b", m))
    # One entry per page: every entry once, in order.
    seen, kw = [], {}
    for _ in range(20):
        r = s3.list_object_versions(Bucket=vbucket, MaxKeys=1, **kw)
        entries = r.get("Versions", []) + r.get("DeleteMarkers", [])
        assert len(entries) == 1, r
        seen.append((entries[0]["Key"], entries[0]["VersionId"]))
        if not r["IsTruncated"]:
            break
        kw = {"KeyMarker": r["NextKeyMarker"], "VersionIdMarker": r["NextVersionIdMarker"]}
    assert seen == expected
    r = s3.list_object_versions(Bucket=vbucket, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "c/"]
    assert {v["Key"] for v in r.get("Versions", [])} == {"b"}
    r = s3.list_object_versions(Bucket=vbucket, Prefix="a/")
    assert [(v["Key"], v["IsLatest"]) for v in r["Versions"]] == [
        ("a/1", True), ("a/1", False), ("a/2", True), ("a/2", False)]
    r = s3.list_object_versions(Bucket=vbucket, KeyMarker="a/2")
    assert r["Versions"][0]["Key"] == "b" and r["KeyMarker"] == "a/2"
    with pytest.raises(ClientError) as e:
        s3.list_object_versions(Bucket=vbucket, VersionIdMarker="x")
    assert err(e) == ("InvalidArgument", 400)


def test_versions_as_sources_and_subjects_of_other_calls(s3, vbucket, gateway):
    v1 = s3.put_object(Bucket=vbucket, Key="src", Body=b"old bytes", Tagging="t=1")["VersionId"]
    v2 = s3.put_object(Bucket=vbucket, Key="src", Body=b"new")["VersionId"]
    # CopyObject and UploadPartCopy from an older version.
    c = s3.copy_object(Bucket=vbucket, Key="copy", CopySource={"Bucket": vbucket, "Key": "src", "VersionId": v1})
    assert c["CopySourceVersionId"] == v1
    got = s3.get_object(Bucket=vbucket, Key="copy")
    assert got["Body"].read() == b"old bytes" and got["VersionId"] == c["VersionId"] != v1
    up = s3.create_multipart_upload(Bucket=vbucket, Key="mp")["UploadId"]
    p = s3.upload_part_copy(Bucket=vbucket, Key="mp", UploadId=up, PartNumber=1,
                            CopySource={"Bucket": vbucket, "Key": "src", "VersionId": v1})
    assert p["CopySourceVersionId"] == v1
    s3.complete_multipart_upload(Bucket=vbucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=vbucket, Key="mp")["Body"].read() == b"old bytes"
    # Tags of an older version: read and changed there, the current's untouched.
    assert s3.get_object_tagging(Bucket=vbucket, Key="src", VersionId=v1)["TagSet"] == [{"Key": "t", "Value": "1"}]
    s3.put_object_tagging(Bucket=vbucket, Key="src", VersionId=v1, Tagging={"TagSet": [{"Key": "t", "Value": "2"}]})
    assert s3.get_object_tagging(Bucket=vbucket, Key="src", VersionId=v1)["TagSet"] == [{"Key": "t", "Value": "2"}]
    assert s3.get_object_tagging(Bucket=vbucket, Key="src")["TagSet"] == []
    assert s3.get_object(Bucket=vbucket, Key="src", VersionId=v1)["Body"].read() == b"old bytes"
    # GetObjectAttributes and the ACL call of a version.
    a = s3.get_object_attributes(Bucket=vbucket, Key="src", VersionId=v1, ObjectAttributes=["ObjectSize", "ETag"])
    assert (a["ObjectSize"], a["VersionId"]) == (9, v1)
    assert s3.get_object_attributes(Bucket=vbucket, Key="src", ObjectAttributes=["ObjectSize"])["VersionId"] == v2
    s3.get_object_acl(Bucket=vbucket, Key="src", VersionId=v1)
    with pytest.raises(ClientError) as e:
        s3.get_object_acl(Bucket=vbucket, Key="src", VersionId="1" * 24)
    assert err(e) == ("NoSuchVersion", 404)
    # A form upload names its version.
    form = gateway.client(signature_version="s3v4").generate_presigned_post(vbucket, "posted")
    r = requests.post(f"{gateway.endpoint}/{vbucket}", data=form["fields"],
                      files={"file": ("f", b"posted")}, allow_redirects=False, timeout=30)
    assert r.status_code == 204, r.text
    assert r.headers["x-amz-version-id"] == s3.head_object(Bucket=vbucket, Key="posted")["VersionId"]


def test_files_people_change_on_the_share_are_versions_too(s3, vbucket, samba):
    from conftest import put_on_share
    s3.put_object(Bucket=vbucket, Key="shared.txt", Body=b"through s3")
    put_on_share(samba, vbucket, "shared.txt", b"edited on the share")
    head = s3.head_object(Bucket=vbucket, Key="shared.txt")
    theirs = head["VersionId"]
    assert theirs.startswith("s") and len(theirs) == 24, theirs
    assert s3.head_object(Bucket=vbucket, Key="shared.txt")["VersionId"] == theirs
    ours = s3.put_object(Bucket=vbucket, Key="shared.txt", Body=b"s3 again")["VersionId"]
    _, listed = versions_of(s3, vbucket)
    assert [v for _, v, _, _, _ in listed] == [ours, theirs]
    assert s3.get_object(Bucket=vbucket, Key="shared.txt", VersionId=theirs)["Body"].read() == b"edited on the share"


def test_a_key_kept_beside_a_directory_of_its_name_keeps_its_versions(s3, vbucket, samba):
    v1 = s3.put_object(Bucket=vbucket, Key="a", Body=b"a one")["VersionId"]
    s3.put_object(Bucket=vbucket, Key="a/b", Body=b"under a")
    # `a` is now kept beside the directory `a`; an overwrite still keeps
    # the version it replaces, and the key under it is untouched.
    v2 = s3.put_object(Bucket=vbucket, Key="a", Body=b"a two")["VersionId"]
    assert s3.get_object(Bucket=vbucket, Key="a")["Body"].read() == b"a two"
    assert s3.get_object(Bucket=vbucket, Key="a", VersionId=v1)["Body"].read() == b"a one"
    assert s3.get_object(Bucket=vbucket, Key="a/b")["Body"].read() == b"under a"
    _, listed = versions_of(s3, vbucket)
    assert [(k, v) for k, v, _, _, _ in listed] == [("a", v2), ("a", v1), ("a/b", listed[2][1])]
    # Deleting the current version by ID brings the older one back beside
    # the directory.
    s3.delete_object(Bucket=vbucket, Key="a", VersionId=v2)
    assert s3.get_object(Bucket=vbucket, Key="a")["Body"].read() == b"a one"
    assert s3.get_object(Bucket=vbucket, Key="a/b")["Body"].read() == b"under a"


def test_versions_are_ordered_by_when_they_were_replaced(s3, vbucket):
    """A multipart upload completed after a PUT is the newer version, though
    its bytes (parts written before the PUT) are older on the share."""
    up = s3.create_multipart_upload(Bucket=vbucket, Key="k")["UploadId"]
    part = s3.upload_part(Bucket=vbucket, Key="k", UploadId=up, PartNumber=1, Body=b"multipart")
    time.sleep(1.2)
    s = s3.put_object(Bucket=vbucket, Key="k", Body=b"single")["VersionId"]
    m = s3.complete_multipart_upload(Bucket=vbucket, Key="k", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})["VersionId"]
    x = s3.put_object(Bucket=vbucket, Key="k", Body=b"newest")["VersionId"]
    _, listed = versions_of(s3, vbucket)
    assert [v for _, v, _, _, _ in listed] == [x, m, s]
    s3.delete_object(Bucket=vbucket, Key="k", VersionId=x)
    assert s3.get_object(Bucket=vbucket, Key="k")["Body"].read() == b"multipart"


def test_list_object_versions_with_a_key_marker_outside_the_prefix(s3, vbucket):
    a = s3.put_object(Bucket=vbucket, Key="a", Body=b"a")["VersionId"]
    s3.put_object(Bucket=vbucket, Key="photos/p", Body=b"p")
    r = s3.list_object_versions(Bucket=vbucket, Prefix="photos/", Delimiter="/", KeyMarker="a", VersionIdMarker=a)
    assert [v["Key"] for v in r.get("Versions", [])] == ["photos/p"]
    r = s3.list_object_versions(Bucket=vbucket, Prefix="photos/", KeyMarker="a", VersionIdMarker=a)
    assert [v["Key"] for v in r.get("Versions", [])] == ["photos/p"]


def test_versions_keep_their_order_when_the_gateways_clock_is_behind_the_shares(samba):
    """A version and the delete marker after it are ordered by one clock,
    the storing gateway's, not the share's for one and the gateway's for the
    other: a gateway five minutes behind the share (libfaketime) still
    answers the key as deleted."""
    from pathlib import Path
    from conftest import Gateway
    lib = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    g = Gateway(samba, env={"LD_PRELOAD": str(lib), "FAKETIME": "-5m", "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
    try:
        s3 = g.client()
        b = new_versioned_bucket(s3)
        v1 = s3.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
        v2 = s3.put_object(Bucket=b, Key="k", Body=b"two")["VersionId"]
        marker = s3.delete_object(Bucket=b, Key="k")["VersionId"]
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=b, Key="k")
        assert headers(e).get("x-amz-delete-marker") == "true" and headers(e)["x-amz-version-id"] == marker
        _, listed = versions_of(s3, b)
        assert sorted((v, latest) for _, v, latest, _, _ in listed) == sorted(
            [(marker, True), (v2, False), (v1, False)])
        # Removing the marker brings back the newest version, not the oldest.
        s3.delete_object(Bucket=b, Key="k", VersionId=marker)
        assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"two"
    finally:
        g.stop()
