"""Several instances, one share (issue 10, point 5): two smbgate instances
on one smbd behind HAProxy (round-robin per request, as in docs/deployment.md's
example). The races and a multipart upload go through HAProxy, so the
requests of one operation land on both instances; what they must agree on
lives on the share."""

import hashlib
import json
import os
import time

import pytest

from conftest import balanced_pair
from s3util import racing_puts
from test_overwrite_race import overwrite_race

MIB = 1 << 20


@pytest.fixture(scope="module")
def pair(own_samba, tmp_path_factory):
    yield from balanced_pair(own_samba, own_samba, tmp_path_factory.mktemp("two"))


def served(gw, operation, bucket):
    """How many `operation` requests on `bucket` `gw` answered (its access log)."""
    lines = [json.loads(l) for l in gw.access_log.read_text().splitlines() if l.strip()]
    return sum(1 for l in lines if l["operation"] == operation and l["bucket"] == bucket)


@pytest.mark.parametrize("size", [64 * 1024, 3 * MIB])
def test_conditional_creates_through_both_instances_have_one_winner(pair, own_samba, size):
    a, b, lb = pair
    bucket = f"lb-create-{size}"
    lb.client().create_bucket(Bucket=bucket)
    clients = [lb.client() for _ in range(20)]
    for round_ in range(3):
        key = f"lock-{round_}"
        bodies = [os.urandom(size) for _ in range(20)]
        results = racing_puts(clients, bucket, key, bodies, IfNoneMatch="*")
        winners = [i for i, st, _ in results if st == 200]
        assert len(winners) == 1, results
        assert sorted((st, c) for _, st, c in results if st != 200) == [(412, "PreconditionFailed")] * 19, results
        assert (own_samba.share_path / bucket / key).read_bytes() == bodies[winners[0]]
    time.sleep(0.2)
    assert served(a, "PutObject", bucket) > 0 and served(b, "PutObject", bucket) > 0


def test_if_match_through_both_instances_is_one_compare_and_swap(pair, own_samba):
    a, b, lb = pair
    bucket = "lb-cas"
    lb.client().create_bucket(Bucket=bucket)
    clients = [lb.client() for _ in range(20)]
    etag = lb.client().put_object(Bucket=bucket, Key="state", Body=b"seed")["ETag"]
    for round_ in range(3):
        bodies = [os.urandom(256 * 1024) for _ in range(20)]
        results = racing_puts(clients, bucket, "state", bodies, IfMatch=etag)
        winners = [i for i, st, _ in results if st == 200]
        assert len(winners) == 1, (round_, results)
        assert sorted((st, c) for _, st, c in results if st != 200) == [(412, "PreconditionFailed")] * 19
        want = hashlib.md5(bodies[winners[0]]).hexdigest()
        assert hashlib.md5((own_samba.share_path / bucket / "state").read_bytes()).hexdigest() == want
        etag = lb.client().head_object(Bucket=bucket, Key="state")["ETag"]
        assert etag == f'"{want}"'


def test_overwrites_through_both_instances_never_404_or_tear(pair, own_samba):
    overwrite_race(pair[2], own_samba.share_path, float(os.environ.get("SMBGATE_RACE_SECONDS", "6")))


def test_a_multipart_upload_whose_parts_go_to_both_instances(pair, own_samba):
    a, b, lb = pair
    s3 = lb.client()
    bucket = "lb-multipart"
    s3.create_bucket(Bucket=bucket)
    up = s3.create_multipart_upload(Bucket=bucket, Key="big.bin")["UploadId"]
    parts = [os.urandom(5 * MIB) for _ in range(5)] + [os.urandom(123)]
    etags = [s3.upload_part(Bucket=bucket, Key="big.bin", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]
             for n, p in enumerate(parts)]
    listed = s3.list_parts(Bucket=bucket, Key="big.bin", UploadId=up)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == \
        [(n + 1, e, len(p)) for n, (e, p) in enumerate(zip(etags, parts))]
    r = s3.complete_multipart_upload(Bucket=bucket, Key="big.bin", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    assert r["ETag"] == f'"{hashlib.md5(digests).hexdigest()}-6"'
    whole = b"".join(parts)
    assert (own_samba.share_path / bucket / "big.bin").read_bytes() == whole
    assert s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == whole
    time.sleep(0.2)
    assert served(a, "UploadPart", bucket) >= 2 and served(b, "UploadPart", bucket) >= 2
    assert list((own_samba.share_path / ".smbgate" / "uploads").iterdir()) == []


def test_a_listing_sees_what_the_other_instance_writes_between_pages(pair):
    """Page 1 comes from instance a; b then adds a key that sorts after page
    1 and deletes one that does; the pages that follow, from a again, list
    exactly what the share holds then."""
    a, b, _ = pair
    sa, sb = a.client(), b.client()
    bucket = "lb-listing"
    sa.create_bucket(Bucket=bucket)
    for i in range(30):
        sa.put_object(Bucket=bucket, Key=f"dir/k-{i:02d}", Body=b"x")
    page = sa.list_objects_v2(Bucket=bucket, Prefix="dir/", MaxKeys=10)
    seen = [o["Key"] for o in page["Contents"]]
    assert seen == [f"dir/k-{i:02d}" for i in range(10)]
    sb.put_object(Bucket=bucket, Key="dir/k-25a", Body=b"new")
    sb.delete_object(Bucket=bucket, Key="dir/k-20")
    while page.get("IsTruncated"):
        page = sa.list_objects_v2(Bucket=bucket, Prefix="dir/", MaxKeys=10,
                                  ContinuationToken=page["NextContinuationToken"])
        seen += [o["Key"] for o in page["Contents"]]
    want = sorted([f"dir/k-{i:02d}" for i in range(30) if i != 20] + ["dir/k-25a"])
    assert seen == want
