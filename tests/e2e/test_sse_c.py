"""SSE-C (issue 41, point 6): objects stored encrypted with the key their
client sends, through the gateway's own TLS. The share holds ciphertext in
64 KiB packages, each with a 16-byte tag; a GET needs the same key, reads
only the packages its range touches, and never hands out bytes a package's
tag does not vouch for. Keys never travel over plain HTTP unless the
operator allows it."""

import base64
import hashlib
import math
import os
import subprocess
import time
import uuid

import boto3
import pytest
from botocore.config import Config

from conftest import ACCESS_KEY, BIN, REGION, SECRET_KEY, Gateway
from s3util import expect_error
from test_tls import pki, tls_gw  # noqa: F401 (fixtures, one instance per module)

PACKAGE = 64 * 1024


def stored_len(n):
    return n + 16 * math.ceil(n / PACKAGE)


def sse(key):
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


@pytest.fixture(scope="module")
def gw(tls_gw):
    """test_tls's gateway: its own TLS (.https), and a plain listener (.plain)."""
    return tls_gw


def client(endpoint, ca=None):
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=REGION, verify=str(ca) if ca else None,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))


@pytest.fixture
def s3(gw, pki):
    return client(gw.https, pki / "ca.pem")


@pytest.fixture
def bucket(s3):
    name = f"ssec-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.mark.parametrize("size", [100_000, 3 * 1024 * 1024 + 5], ids=["small", "streamed"])
def test_boto3_round_trip_keeps_only_ciphertext_on_the_share(s3, bucket, samba, size):
    key, body = os.urandom(32), os.urandom(size)
    key_md5 = base64.b64encode(hashlib.md5(key).digest()).decode()
    r = s3.put_object(Bucket=bucket, Key="secret.bin", Body=body, **sse(key))
    assert (r["SSECustomerAlgorithm"], r["SSECustomerKeyMD5"]) == ("AES256", key_md5)
    # Not the body's MD5 (AWS's rule for SSE-C objects), and stable.
    assert r["ETag"] != '"%s"' % hashlib.md5(body).hexdigest()
    got = s3.get_object(Bucket=bucket, Key="secret.bin", **sse(key))
    assert got["Body"].read() == body
    assert (got["ETag"], got["SSECustomerKeyMD5"], got["ContentLength"]) == (r["ETag"], key_md5, size)
    head = s3.head_object(Bucket=bucket, Key="secret.bin", **sse(key))
    assert (head["ContentLength"], head["SSECustomerAlgorithm"], head["ETag"]) == (size, "AES256", r["ETag"])
    [listed] = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert (listed["Key"], listed["Size"], listed["ETag"]) == ("secret.bin", size, r["ETag"])
    stored = (samba.share_path / bucket / "secret.bin").read_bytes()
    assert len(stored) == stored_len(size)
    assert body[:4096] not in stored and body[-4096:] not in stored


def test_ranges_inside_and_across_packages_and_part_one(s3, bucket):
    key, body = os.urandom(32), os.urandom(5 * PACKAGE + 1234)
    s3.put_object(Bucket=bucket, Key="r", Body=body, **sse(key))
    for first, last in [(100, 199), (PACKAGE - 6, PACKAGE + 9), (3 * PACKAGE + 7, 3 * PACKAGE + 7),
                        (2 * PACKAGE, 5 * PACKAGE + 10), (len(body) - 10, len(body) + 50)]:
        got = s3.get_object(Bucket=bucket, Key="r", Range=f"bytes={first}-{last}", **sse(key))
        want = body[first:last + 1]
        assert got["Body"].read() == want, (first, last)
        assert got["ContentRange"] == f"bytes {first}-{first + len(want) - 1}/{len(body)}"
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=-70000", **sse(key))["Body"].read() == body[-70000:]
    part = s3.get_object(Bucket=bucket, Key="r", PartNumber=1, **sse(key))
    assert part["Body"].read() == body and part["ContentLength"] == len(body)
    expect_error(416, "InvalidRange", s3.get_object, Bucket=bucket, Key="r", Range=f"bytes={len(body)}-",
                 **sse(key))


def test_a_multipart_upload_seals_each_part_and_reads_as_one_object(s3, bucket, samba):
    key, other = os.urandom(32), os.urandom(32)
    sizes = [5 * 1024 * 1024 + 3, 5 * 1024 * 1024, 1000]
    parts = [os.urandom(n) for n in sizes]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", **sse(key))
    assert up["SSECustomerAlgorithm"] == "AES256"
    uid = up["UploadId"]
    r = expect_error(400, "InvalidRequest", s3.upload_part, Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1,
                     Body=parts[0])
    assert "Subsequent part requests must include" in r["Error"]["Message"]
    expect_error(400, "InvalidArgument", s3.upload_part, Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1,
                 Body=parts[0], **sse(other))
    # Part numbers 1, 4, 9: the object's parts keep their own numbers.
    numbers = [1, 4, 9]
    etags = []
    # The last part is uploaded twice, with other bytes first: the second
    # upload replaces the first (sealed under a salt of its own).
    s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=9, Body=os.urandom(1000), **sse(key))
    for n, body in zip(numbers, parts):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=n, Body=body, **sse(key))
        assert r["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(key).digest()).decode()
        etags.append(r["ETag"])
    listed = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == list(zip(numbers, sizes))
    done = {"Parts": [{"PartNumber": n, "ETag": e} for n, e in zip(numbers, etags)]}
    # Complete needs no key, but one given must be the upload's.
    expect_error(400, "InvalidArgument", s3.complete_multipart_upload, Bucket=bucket, Key="mp", UploadId=uid,
                 MultipartUpload=done, **sse(other))
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload=done)
    whole = b"".join(parts)
    assert s3.get_object(Bucket=bucket, Key="mp", **sse(key))["Body"].read() == whole
    assert s3.head_object(Bucket=bucket, Key="mp", **sse(key))["ContentLength"] == len(whole)
    seam = sizes[0]
    for first, last in [(seam - 10, seam + 10), (seam + sizes[1] - 1, len(whole) - 1), (70_000, 70_100)]:
        got = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={first}-{last}", **sse(key))["Body"].read()
        assert got == whole[first:last + 1], (first, last)
    part2 = s3.get_object(Bucket=bucket, Key="mp", PartNumber=2, **sse(key))
    assert part2["Body"].read() == parts[1] and part2["PartsCount"] == 3
    expect_error(400, "InvalidRequest", s3.get_object, Bucket=bucket, Key="mp")
    assert (samba.share_path / bucket / "mp").stat().st_size == sum(stored_len(n) for n in sizes)


def test_a_missing_wrong_needless_or_malformed_key_gets_the_answer_aws_gives(s3, bucket):
    key, other = os.urandom(32), os.urandom(32)
    s3.put_object(Bucket=bucket, Key="locked", Body=b"secret", **sse(key))
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain")
    r = expect_error(400, "InvalidRequest", s3.get_object, Bucket=bucket, Key="locked")
    assert "correct parameters must be provided" in r["Error"]["Message"]
    expect_error(400, "400", s3.head_object, Bucket=bucket, Key="locked")  # HEAD has no body
    expect_error(403, "AccessDenied", s3.get_object, Bucket=bucket, Key="locked", **sse(other))
    expect_error(403, "403", s3.head_object, Bucket=bucket, Key="locked", **sse(other))
    r = expect_error(400, "InvalidRequest", s3.get_object, Bucket=bucket, Key="plain", **sse(key))
    assert r["Error"]["Message"] == "The encryption parameters are not applicable to this object."
    bad_md5 = base64.b64encode(hashlib.md5(other).digest()).decode()
    # With an MD5 given, botocore sends the key as given: base64 already.
    r = expect_error(400, "InvalidArgument", s3.put_object, Bucket=bucket, Key="x", Body=b"x",
                     SSECustomerAlgorithm="AES256", SSECustomerKey=base64.b64encode(key).decode(),
                     SSECustomerKeyMD5=bad_md5)
    assert "MD5 hash of the key did not match" in r["Error"]["Message"]
    expect_error(400, "InvalidArgument", s3.put_object, Bucket=bucket, Key="x", Body=b"x", **sse(b"short"))
    expect_error(400, "InvalidEncryptionAlgorithmError", s3.put_object, Bucket=bucket, Key="x", Body=b"x",
                 SSECustomerAlgorithm="AES128", SSECustomerKey=key)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="x")
    # A copy needs the source's key, and only its key.
    expect_error(400, "InvalidRequest", s3.copy_object, Bucket=bucket, Key="copy",
                 CopySource={"Bucket": bucket, "Key": "locked"})
    expect_error(403, "AccessDenied", s3.copy_object, Bucket=bucket, Key="copy",
                 CopySource={"Bucket": bucket, "Key": "locked"},
                 CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=other)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="copy")


def source_key(key):
    return {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": key}


def test_copies_open_the_source_under_its_key_and_seal_the_copy_under_its_own(s3, bucket, samba):
    k1, k2 = os.urandom(32), os.urandom(32)
    body = os.urandom(2 * 1024 * 1024 + 77)
    s3.put_object(Bucket=bucket, Key="src", Body=body, **sse(k1))
    s3.put_object(Bucket=bucket, Key="plain", Body=body)
    src = {"Bucket": bucket, "Key": "src"}
    # Sealed to sealed, under another key.
    r = s3.copy_object(Bucket=bucket, Key="rekeyed", CopySource=src, **source_key(k1), **sse(k2))
    assert r["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(k2).digest()).decode()
    assert s3.get_object(Bucket=bucket, Key="rekeyed", **sse(k2))["Body"].read() == body
    expect_error(403, "AccessDenied", s3.get_object, Bucket=bucket, Key="rekeyed", **sse(k1))
    # Sealed to plain, and plain to sealed.
    s3.copy_object(Bucket=bucket, Key="opened", CopySource=src, **source_key(k1))
    assert s3.get_object(Bucket=bucket, Key="opened")["Body"].read() == body
    assert (samba.share_path / bucket / "opened").read_bytes() == body
    s3.copy_object(Bucket=bucket, Key="sealed", CopySource={"Bucket": bucket, "Key": "plain"}, **sse(k2))
    assert s3.get_object(Bucket=bucket, Key="sealed", **sse(k2))["Body"].read() == body
    assert (samba.share_path / bucket / "sealed").stat().st_size == stored_len(len(body))
    # A sealed part copied from a range of a sealed object.
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mp", **sse(k2))["UploadId"]
    first = 5 * 1024 * 1024
    p1 = os.urandom(first)
    e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1, Body=p1, **sse(k2))["ETag"]
    e2 = s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=2, CopySource=src,
                             CopySourceRange="bytes=100-70099", **source_key(k1), **sse(k2))["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert s3.get_object(Bucket=bucket, Key="mp", **sse(k2))["Body"].read() == p1 + body[100:70100]


def test_over_plain_http_a_key_is_refused_and_nothing_is_stored(gw, s3, bucket):
    plain = client(gw.plain)
    key = os.urandom(32)
    r = expect_error(400, "InvalidRequest", plain.put_object, Bucket=bucket, Key="k", Body=b"x", **sse(key))
    assert "must be made over a secure connection" in r["Error"]["Message"]
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", **sse(key))
    expect_error(400, "InvalidRequest", plain.get_object, Bucket=bucket, Key="k", **sse(key))


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))


def test_a_flipped_byte_on_the_share_is_an_error_never_other_bytes(gw, s3, bucket, samba):
    key = os.urandom(32)
    small, large = os.urandom(3 * PACKAGE), os.urandom(4 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="small", Body=small, **sse(key))
    s3.put_object(Bucket=bucket, Key="large", Body=large, **sse(key))
    flip(samba.share_path / bucket / "small", PACKAGE + 100)
    # Read whole with the open: refused before any byte is sent.
    expect_error(500, "InternalError", s3.get_object, Bucket=bucket, Key="small", **sse(key))
    # The packages before the flipped one are still good.
    assert s3.get_object(Bucket=bucket, Key="small", Range="bytes=0-999", **sse(key))["Body"].read() == small[:1000]
    # Streamed: the body ends in an error at the damaged package.
    flip(samba.share_path / bucket / "large", 3 * 1024 * 1024)
    got = s3.get_object(Bucket=bucket, Key="large", **sse(key))
    with pytest.raises(Exception):
        data = got["Body"].read()
        assert data == large  # unreachable if the body failed, as it must
        raise AssertionError("a damaged object was sent whole")
    # ... and the gateway says so in its log, with the object's path.
    deadline = time.time() + 10
    while time.time() < deadline:
        gw.log.flush()
        logged = [line for line in open(gw.log.name, errors="replace") if "failed its integrity check" in line]
        if any(f"{bucket}\\\\large" in line or f"{bucket}\\large" in line for line in logged):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"no WARN for the damaged package: {logged}")
    # Cut on the share (the record kept): an error too.
    with open(samba.share_path / bucket / "small", "r+b") as f:
        f.truncate(stored_len(3 * PACKAGE) - 1)
    with pytest.raises(Exception):
        s3.get_object(Bucket=bucket, Key="small", **sse(key))["Body"].read()


def test_aws_cli_and_rclone_round_trip(gw, pki, bucket, tmp_path):
    key = os.urandom(32)
    (tmp_path / "key.bin").write_bytes(key)
    src = tmp_path / "up.bin"
    # Over aws-cli's 8 MiB threshold: a multipart upload of two parts.
    src.write_bytes(os.urandom(9 * 1024 * 1024))
    aws = [str(BIN / "aws"), "--endpoint-url", gw.https, "--ca-bundle", str(pki / "ca.pem")]
    keyarg = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{tmp_path / 'key.bin'}"]
    for args in (["s3", "cp", str(src), f"s3://{bucket}/cli.bin", *keyarg],
                 ["s3", "cp", f"s3://{bucket}/cli.bin", str(tmp_path / "down.bin"), *keyarg]):
        r = subprocess.run(aws + args, env=gw.aws_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "down.bin").read_bytes() == src.read_bytes()
    r = subprocess.run(aws + ["s3", "cp", f"s3://{bucket}/cli.bin", str(tmp_path / "nokey.bin")],
                       env=gw.aws_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "400" in r.stderr, r.stderr

    conf = tmp_path / "rclone.conf"
    conf.write_text(
        "[gw]\ntype = s3\nprovider = Other\n"
        f"access_key_id = {ACCESS_KEY}\nsecret_access_key = {SECRET_KEY}\n"
        f"endpoint = {gw.https}\nregion = {REGION}\nforce_path_style = true\n"
        "sse_customer_algorithm = AES256\n"
        f"sse_customer_key_base64 = {base64.b64encode(key).decode()}\n")
    rclone = [str(BIN / "rclone"), "--config", str(conf), "--ca-cert", str(pki / "ca.pem"),
              "--retries", "1", "--low-level-retries", "1"]
    r = subprocess.run(rclone + ["copyto", str(src), f"gw:{bucket}/rclone.bin"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    r = subprocess.run(rclone + ["cat", f"gw:{bucket}/rclone.bin"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == src.read_bytes()
    r = subprocess.run(rclone + ["cat", f"gw:{bucket}/cli.bin"], capture_output=True, timeout=120)
    assert r.stdout == src.read_bytes(), "the key aws-cli stored with reads back through rclone"


def test_versions_of_an_sse_c_key_each_need_their_own_key(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    k1, k2 = os.urandom(32), os.urandom(32)
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b"one" * 30000, **sse(k1))["VersionId"]
    s3.put_object(Bucket=bucket, Key="v", Body=b"two", **sse(k2))
    assert s3.get_object(Bucket=bucket, Key="v", **sse(k2))["Body"].read() == b"two"
    assert s3.get_object(Bucket=bucket, Key="v", VersionId=v1, **sse(k1))["Body"].read() == b"one" * 30000
    expect_error(403, "AccessDenied", s3.get_object, Bucket=bucket, Key="v", VersionId=v1, **sse(k2))
    sizes = {v["VersionId"]: v["Size"] for v in s3.list_object_versions(Bucket=bucket)["Versions"]}
    assert sizes[v1] == 90000 and sorted(sizes.values()) == [3, 90000]


@pytest.mark.parametrize("size", [16 * 1024, 64 * 1024], ids=["16k", "64k"])
def test_the_object_cache_never_serves_the_sealed_bytes(s3, bucket, size):
    # The cache reads the first 16 KiB with a HEAD and up to 64 KiB when it
    # fills: an object of exactly that size must not be taken for its file.
    key, body = os.urandom(32), os.urandom(size)
    s3.put_object(Bucket=bucket, Key="c", Body=body, **sse(key))
    for _ in range(3):
        assert s3.head_object(Bucket=bucket, Key="c", **sse(key))["ContentLength"] == size
        assert s3.get_object(Bucket=bucket, Key="c", **sse(key))["Body"].read() == body


def test_a_large_multipart_object_with_parts_off_the_package_size_streams_whole(samba):
    # Parts of 5,250,000 bytes end mid-package: the file is longer than
    # one run of packages of the same total, and a GET of more than two
    # segments, fetched ahead on other connections (a prefetch of 4), checks
    # the file's size before each. Through a gateway that takes keys over
    # plain HTTP, as an operator behind a TLS proxy may set it.
    g = Gateway(samba, env={"SMBGATE_SSE_C_OVER_HTTP": "on", "SMBGATE_PREFETCH": "4"})
    try:
        s3 = g.client()
        bucket = f"ssec-big-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket)
        key = os.urandom(32)
        parts = [os.urandom(5_250_000) for _ in range(4)]
        uid = s3.create_multipart_upload(Bucket=bucket, Key="big", **sse(key))["UploadId"]
        etags = [s3.upload_part(Bucket=bucket, Key="big", UploadId=uid, PartNumber=n + 1, Body=p,
                                **sse(key))["ETag"] for n, p in enumerate(parts)]
        s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
        assert s3.get_object(Bucket=bucket, Key="big", **sse(key))["Body"].read() == b"".join(parts)
        s3.copy_object(Bucket=bucket, Key="big2", CopySource={"Bucket": bucket, "Key": "big"},
                       **source_key(key), **sse(key))
        assert s3.get_object(Bucket=bucket, Key="big2", **sse(key))["Body"].read() == b"".join(parts)
    finally:
        g.stop()


def test_a_copy_of_a_copy_and_a_copy_onto_itself_with_a_new_key(s3, bucket):
    k1, k2 = os.urandom(32), os.urandom(32)
    body = os.urandom(10_000)
    s3.put_object(Bucket=bucket, Key="a", Body=body)
    # A server-side copy's record names its file; a sealed copy of it must
    # not carry that over.
    s3.copy_object(Bucket=bucket, Key="b", CopySource={"Bucket": bucket, "Key": "a"})
    s3.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "b"}, **sse(k1))
    assert s3.get_object(Bucket=bucket, Key="c", **sse(k1))["Body"].read() == body
    # Changing an object's key in place, as AWS allows.
    s3.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "c"}, **source_key(k1), **sse(k2))
    assert s3.get_object(Bucket=bucket, Key="c", **sse(k2))["Body"].read() == body
    expect_error(403, "AccessDenied", s3.get_object, Bucket=bucket, Key="c", **sse(k1))
