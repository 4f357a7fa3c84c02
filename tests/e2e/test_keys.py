"""Key mapping through boto3: awkward keys round-trip exactly (bytes, listing,
and the mapped name on the share), keys the share cannot hold are refused
with a 4xx before anything is written, and no key escapes its bucket."""

import http.client
import os
from urllib.parse import unquote, urlparse

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ACCESS_KEY, REGION, SECRET_KEY
from s3util import expect_error, files_under, md5_etag, s3_error, status, wait_no_tmp


def pua(c):
    return chr(0xF000 + c)


LONG_KEY = "/".join(["k" * 200] * 4) + "/" + "z" * 219  # 4*200 + 4 + 219 = 1023 ... +1 below
LONG_KEY = LONG_KEY + "z"
assert len(LONG_KEY.encode()) == 1024

# key -> path components on the share (SFM private-use mapping, see store/keys.rs)
ROUND_TRIP = {
    "a b": ["a b"],
    "a+b": ["a+b"],
    "100%": ["100%"],
    "ü/é": ["ü", "é"],
    "x:y": ["x" + pua(0x22) + "y"],
    "q?": ["q" + pua(0x25)],
    "dot.": ["dot" + pua(0x29)],
    "trail ": ["trail" + pua(0x28)],
    '"*<>|': [pua(0x20) + pua(0x21) + pua(0x23) + pua(0x24) + pua(0x27)],
    "ctl\x01x": ["ctl" + pua(0x01) + "x"],
    "back\\slash": ["back" + pua(0x26) + "slash"],
    "dir./sub /f": ["dir" + pua(0x29), "sub" + pua(0x28), "f"],
    "a.b. c": ["a.b. c"],
    "tab\there": ["tab" + pua(0x09) + "here"],
    "~tilde&amp;=@$,;": ["~tilde&amp;=@$,;"],
    "emoji-😀": ["emoji-😀"],
    "x" * 255: ["x" * 255],
    LONG_KEY: LONG_KEY.split("/"),
}


@pytest.mark.parametrize("key", list(ROUND_TRIP), ids=lambda k: repr(k)[:40])
def test_key_round_trip(s3, bucket, samba, key):
    body = ("body of " + key).encode()
    r = s3.put_object(Bucket=bucket, Key=key, Body=body)
    assert status(r) == 200
    assert r["ETag"] == md5_etag(body)
    g = s3.get_object(Bucket=bucket, Key=key)
    assert g["Body"].read() == body
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(body)
    listed = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed["Contents"]] == [key]
    # boto3 asks for encoding-type=url on its own and decodes; asked for
    # explicitly, the keys stay encoded.
    assert [unquote(o["Key"]) for o in s3.list_objects_v2(Bucket=bucket, EncodingType="url")["Contents"]] == [key]
    assert [o["Key"] for o in s3.list_objects(Bucket=bucket)["Contents"]] == [key]
    on_disk = samba.share_path / bucket
    for c in ROUND_TRIP[key]:
        on_disk = on_disk / c
    assert on_disk.is_file(), files_under(samba.share_path / bucket)
    assert on_disk.read_bytes() == body
    # Copy to and from the key, then delete it.
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": key})
    assert s3.get_object(Bucket=bucket, Key="copy")["Body"].read() == body
    assert status(s3.delete_object(Bucket=bucket, Key=key)) == 204
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key=key)
    assert not on_disk.exists()


def test_all_round_trip_keys_together_listing(s3, bucket):
    for k in ROUND_TRIP:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 5}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == sorted(ROUND_TRIP, key=lambda k: k.encode())


@pytest.mark.parametrize("key", ["..", "a/../b", "./x", "a//b", "a/./b", "x/..", "a/", "/lead"][:-2]
                         + ["a/b/../../../escape", "/lead"],
                         ids=repr)
def test_unstorable_keys_refused(s3, bucket, samba, key):
    before = files_under(samba.share_path)
    st, code, r = s3_error(s3.put_object, Bucket=bucket, Key=key, Body=b"x")
    assert st == 400, r
    assert code == "InvalidArgument", r  # the gateway's documented choice
    assert files_under(samba.share_path) == before
    assert files_under(samba.share_path / bucket) == []
    assert wait_no_tmp(samba) == []


def test_unstorable_key_get_head_delete(s3, bucket):
    # A key that cannot exist: reading it is NoSuchKey (or a 400), never a 5xx;
    # deleting it is 204 like any missing key, or a 400.
    for key in ("a//b", "a/../b"):
        st, code, _ = s3_error(s3.get_object, Bucket=bucket, Key=key)
        assert (st, code) in [(404, "NoSuchKey"), (400, "InvalidArgument")]
        try:
            r = s3.delete_object(Bucket=bucket, Key=key)
            assert status(r) == 204
        except Exception as e:  # noqa: BLE001
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_key_too_long(s3, bucket, samba):
    key = LONG_KEY + "z"
    assert len(key.encode()) == 1025
    expect_error(400, "KeyTooLongError", s3.put_object, Bucket=bucket, Key=key, Body=b"x")
    assert files_under(samba.share_path / bucket) == []


def test_key_too_long_multibyte(s3, bucket, samba):
    key = "é/" * 341 + "ab"  # 341*3 + 2 = 1025 bytes, 684 characters
    assert len(key.encode()) == 1025
    expect_error(400, "KeyTooLongError", s3.put_object, Bucket=bucket, Key=key, Body=b"x")
    assert files_under(samba.share_path / bucket) == []


@pytest.mark.parametrize("key", ["c" * 256, "dir/" + "c" * 256 + "/f", "😀" * 128], ids=["256", "mid-256", "emoji-256-utf16"])
def test_component_too_long(s3, bucket, samba, key):
    expect_error(400, "KeyTooLongError", s3.put_object, Bucket=bucket, Key=key, Body=b"x")
    assert files_under(samba.share_path / bucket) == []
    assert wait_no_tmp(samba) == []


def test_internal_dir_not_a_key(s3, bucket, samba):
    st, code, r = s3_error(s3.put_object, Bucket=bucket, Key=".smbgate/tmp/x", Body=b"x")
    # Inside a bucket the name is harmless, but the gateway reserves it; any 4xx is fine.
    assert 400 <= st < 500, r


def test_case_collision_never_merges(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Case/File", Body=b"upper")
    try:
        s3.put_object(Bucket=bucket, Key="case/file", Body=b"lower")
        stored_lower = True
    except Exception as e:  # noqa: BLE001
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 409, e.response
        stored_lower = False
    # Whatever happened, "Case/File" still has its own bytes.
    assert s3.get_object(Bucket=bucket, Key="Case/File")["Body"].read() == b"upper"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    if stored_lower:
        assert s3.get_object(Bucket=bucket, Key="case/file")["Body"].read() == b"lower"
        assert keys == ["Case/File", "case/file"]
    else:
        assert keys == ["Case/File"]
        expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="case/file")


def test_case_insensitive_read_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Mixed", Body=b"m")
    # S3 keys are case-sensitive: "mixed" does not exist.
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="mixed")


def test_case_insensitive_head_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Dir/Mixed", Body=b"m")
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="Dir/MIXED")
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="dir/Mixed")


def test_case_insensitive_delete_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Mixed", Body=b"m")
    assert status(s3.delete_object(Bucket=bucket, Key="mixed")) == 204
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "MIXED"}]})
    assert r["Deleted"] == [{"Key": "MIXED"}]
    assert s3.get_object(Bucket=bucket, Key="Mixed")["Body"].read() == b"m"


def test_case_insensitive_copy_source_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Src", Body=b"s")
    expect_error(404, "NoSuchKey", s3.copy_object, Bucket=bucket, Key="dst",
                 CopySource={"Bucket": bucket, "Key": "src"})


def test_bucket_name_case(s3, bucket):
    # Bucket names are lower-case in S3; an upper-case spelling is another
    # (non-existent, invalid) bucket, never an alias of ours.
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    st, code, r = s3_error(s3.get_object, Bucket=bucket.upper(), Key="k")
    assert st in (400, 404), r


def test_long_utf8_component(s3, bucket, samba):
    # 127 emoji: 254 UTF-16 units (within the SMB limit) but 508 bytes of
    # UTF-8, more than a Linux file system holds in one name. Either it
    # round-trips, or it is refused with KeyTooLongError; never a 500, and
    # nothing is left behind.
    key = "😀" * 127
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"e")
    except Exception as e:  # noqa: BLE001
        r = e.response
        assert (r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]) == (400, "KeyTooLongError"), r
        assert files_under(samba.share_path / bucket) == []
        assert wait_no_tmp(samba) == []
        return
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"e"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [key]


# ---------------------------------------------------------------- directory markers

def test_directory_marker(s3, bucket, samba):
    r = s3.put_object(Bucket=bucket, Key="d/", Body=b"")
    assert status(r) == 200
    assert r["ETag"] == md5_etag(b"")
    h = s3.head_object(Bucket=bucket, Key="d/")
    assert h["ContentLength"] == 0
    assert h["ETag"] == md5_etag(b"")
    assert s3.get_object(Bucket=bucket, Key="d/")["Body"].read() == b""
    assert (samba.share_path / bucket / "d").is_dir()
    lst = s3.list_objects_v2(Bucket=bucket)
    assert [(o["Key"], o["Size"]) for o in lst["Contents"]] == [("d/", 0)]
    lst = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert lst.get("Contents", []) == []
    assert lst["CommonPrefixes"] == [{"Prefix": "d/"}]
    lst = s3.list_objects_v2(Bucket=bucket, Prefix="d/", Delimiter="/")
    assert [o["Key"] for o in lst["Contents"]] == ["d/"]
    # d without the slash is not an object.
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="d")
    assert status(s3.delete_object(Bucket=bucket, Key="d/")) == 204
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="d/")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_directory_marker_with_children(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="d/", Body=b"")
    s3.put_object(Bucket=bucket, Key="d/x", Body=b"x")
    s3.put_object(Bucket=bucket, Key="d/sub/", Body=b"")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["d/", "d/sub/", "d/x"]
    s3.delete_object(Bucket=bucket, Key="d/")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["d/sub/", "d/x"]
    assert s3.get_object(Bucket=bucket, Key="d/x")["Body"].read() == b"x"
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="d/")


def test_implicit_directory_is_not_a_marker(s3, bucket):
    s3.put_object(Bucket=bucket, Key="i/x", Body=b"x")
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="i/")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["i/x"]


def test_directory_marker_with_metadata(s3, bucket):
    s3.put_object(Bucket=bucket, Key="m/", Body=b"", ContentType="application/x-directory",
                  Metadata={"k": "v"})
    h = s3.head_object(Bucket=bucket, Key="m/")
    assert h["ContentType"] == "application/x-directory"
    assert h["Metadata"] == {"k": "v"}


# ---------------------------------------------------------------- escapes

def _signed_raw(gateway, method, path, body=b""):
    """A SigV4-signed request to an exact, unnormalised path."""
    url = gateway.endpoint + path
    req = AWSRequest(method=method, url=url, data=body,
                     headers={"x-amz-content-sha256": __import__("hashlib").sha256(body).hexdigest()})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    u = urlparse(gateway.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in req.headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def snapshot_outside(samba, bucket):
    root = samba.share_path
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not str(p.relative_to(root)).startswith((bucket, ".smbgate")))


@pytest.mark.parametrize("key", ["a\\..\\..\\x", "..\\..\\x", "\\x", "a\\b", "..\\", "x\\..", ".\\x"])
def test_backslash_keys_stay_inside(s3, bucket, samba, key):
    before = snapshot_outside(samba, bucket)
    parent_before = sorted(os.listdir(samba.share_path.parent))
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"esc")
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"esc"
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [key]
        # One file, directly in the bucket, with the backslashes mapped.
        assert os.listdir(samba.share_path / bucket) == [key.replace("\\", pua(0x26)).replace(".", ".")
                                                        if not key.endswith(".") else
                                                        key[:-1].replace("\\", pua(0x26)) + pua(0x29)]
    except Exception as e:  # noqa: BLE001
        if not hasattr(e, "response"):
            raise
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400, e.response
    assert snapshot_outside(samba, bucket) == before
    assert sorted(os.listdir(samba.share_path.parent)) == parent_before


@pytest.mark.parametrize("path", [
    "/{b}/..%2Fescape1", "/{b}/%2E%2E/escape2", "/{b}/a/%2e%2e/%2e%2e/escape3", "/{b}/../escape4",
    "/{b}/a/../../escape5", "/{b}/%2e%2e%5cescape6", "/{b}/a%2F..%2F..%2Fescape7",
])
def test_raw_traversal_paths_refused(gateway, s3, bucket, samba, path):
    before = snapshot_outside(samba, bucket)
    parent_before = sorted(os.listdir(samba.share_path.parent))
    st, body = _signed_raw(gateway, "PUT", path.format(b=bucket), b"escape")
    assert 400 <= st < 500 or st == 200, (st, body)
    assert snapshot_outside(samba, bucket) == before
    assert sorted(os.listdir(samba.share_path.parent)) == parent_before
    assert not any("escape" in p for p in before)
    if st == 200:
        # Accepted only as a key inside the bucket.
        assert any("escape" in p for p in files_under(samba.share_path / bucket))


def test_case_insensitive_listing_prefix_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Dir/Sub/a", Body=b"x")
    for prefix in ("dir/", "dir/Sub/", "Dir/sub/", "DIR"):
        r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
        assert r.get("Contents", []) == [], prefix
        r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
        assert r.get("Contents", []) == [] and r.get("CommonPrefixes", []) == [], prefix
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="Dir/Sub/")["Contents"]] == ["Dir/Sub/a"]


def test_case_insensitive_multipart_does_not_alias(s3, bucket):
    s3.put_object(Bucket=bucket, Key="Up", Body=b"orig")
    uid = s3.create_multipart_upload(Bucket=bucket, Key="up")["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="up", UploadId=uid, PartNumber=1, Body=b"new")["ETag"]
    try:
        s3.complete_multipart_upload(Bucket=bucket, Key="up", UploadId=uid,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
        assert s3.get_object(Bucket=bucket, Key="up")["Body"].read() == b"new"
    except Exception as ex:  # noqa: BLE001
        assert ex.response["ResponseMetadata"]["HTTPStatusCode"] == 409, ex.response
    assert s3.get_object(Bucket=bucket, Key="Up")["Body"].read() == b"orig"
