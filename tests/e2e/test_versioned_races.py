"""The races tested on plain buckets, on versioned ones (issue 39, point 1):
overwrites under readers show no spurious 404 and no torn body, and keep
exactly one version per successful PUT; of racing If-None-Match and
If-Match PUTs, through one instance or two, exactly one wins and exactly
one version is added; a gateway killed (-9) mid-PUT leaves the versions as
they were."""

import hashlib
import os
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway, balanced_pair
from s3util import racing_puts
from test_overwrite_race import overwrite_race
from test_conditional_delete_race import pair  # noqa: F401  (a fixture: two gateways on one share)
from test_temp_reclaim import start_put

MIB = 1 << 20


def versioned_bucket(s3):
    name = f"vr-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def all_versions(s3, bucket):
    out, kw = [], {}
    while True:
        r = s3.list_object_versions(Bucket=bucket, **kw)
        out += r.get("Versions", [])
        if not r["IsTruncated"]:
            return out
        kw = {"KeyMarker": r["NextKeyMarker"], "VersionIdMarker": r["NextVersionIdMarker"]}


def test_overwrites_on_a_versioned_bucket_keep_one_version_per_put(pair, own_samba):
    counts = overwrite_race(pair[0], own_samba.share_path, 6, versioned=True)
    s3 = pair[0].client()
    bucket, puts = counts["bucket"], counts["put"]
    versions = all_versions(s3, bucket)
    # The first PUT, then one version per PUT the race made.
    assert len(versions) == puts + 1, (len(versions), puts)
    assert len({v["VersionId"] for v in versions}) == len(versions)
    assert [v["IsLatest"] for v in versions].count(True) == 1 and versions[0]["IsLatest"]
    # Each kept version is whole: its bytes are its ETag's.
    for v in versions[:: max(1, len(versions) // 8)]:
        body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
        assert f'"{hashlib.md5(body).hexdigest()}"' == v["ETag"]


@pytest.mark.parametrize("instances", [1, 2])
def test_racing_conditional_puts_on_a_versioned_bucket_add_one_version_each(pair, own_samba, instances):
    gws = pair[:instances]
    bucket = versioned_bucket(gws[0].client())
    clients = [gws[i % instances].client() for i in range(20)]
    bodies = [os.urandom(64 * 1024) for _ in range(20)]
    results = racing_puts(clients, bucket, "lock", bodies, IfNoneMatch="*")
    assert sorted(st for _, st, _ in results) == [200] + [412] * 19, results
    etag = gws[0].client().head_object(Bucket=bucket, Key="lock")["ETag"]
    for round_ in range(3):
        bodies = [os.urandom(64 * 1024) for _ in range(20)]
        results = racing_puts(clients, bucket, "lock", bodies, IfMatch=etag)
        winners = [i for i, st, _ in results if st == 200]
        assert len(winners) == 1 and sorted(st for _, st, _ in results)[1:] == [412] * 19, (round_, results)
        want = hashlib.md5(bodies[winners[0]]).hexdigest()
        assert hashlib.md5((own_samba.share_path / bucket / "lock").read_bytes()).hexdigest() == want
        etag = gws[-1].client().head_object(Bucket=bucket, Key="lock")["ETag"]
        assert etag == f'"{want}"'
    versions = all_versions(gws[0].client(), bucket)
    assert len(versions) == 4 and versions[0]["ETag"] == etag, versions


def test_a_gateway_killed_mid_put_leaves_the_versions_as_they_were(own_samba):
    dying = Gateway(own_samba)
    s3 = dying.client()
    bucket = versioned_bucket(s3)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"first")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"second")["VersionId"]
    conn = start_put(dying, bucket, "k", 32 * MIB)
    conn.send(os.urandom(16 * MIB))
    time.sleep(0.5)
    dying.proc.kill()
    dying.proc.wait()
    conn.close()
    dying.log.close()
    after = Gateway(own_samba)
    try:
        s3 = after.client()
        got = s3.get_object(Bucket=bucket, Key="k")
        assert (got["Body"].read(), got["VersionId"]) == (b"second", v2)
        assert [(v["VersionId"], v["IsLatest"]) for v in all_versions(s3, bucket)] == [(v2, True), (v1, False)]
        assert s3.get_object(Bucket=bucket, Key="k", VersionId=v1)["Body"].read() == b"first"
    finally:
        after.stop()


def test_an_instances_cached_object_follows_a_versioned_overwrite_through_another(pair):
    a, b = pair[0].client(), pair[1].client()
    bucket = versioned_bucket(a)
    a.put_object(Bucket=bucket, Key="hot", Body=b"first")
    for _ in range(3):  # held in the object cache of the instance that reads
        assert a.get_object(Bucket=bucket, Key="hot")["Body"].read() == b"first"
    v2 = b.put_object(Bucket=bucket, Key="hot", Body=b"second")["VersionId"]
    got = a.get_object(Bucket=bucket, Key="hot")
    assert (got["Body"].read(), got["VersionId"]) == (b"second", v2)
    assert a.head_object(Bucket=bucket, Key="hot")["VersionId"] == v2
    marker = b.delete_object(Bucket=bucket, Key="hot")["VersionId"]
    try:
        a.head_object(Bucket=bucket, Key="hot")
        raise AssertionError("the deleted key still answers")
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == marker


@pytest.fixture(scope="module")
def behind_haproxy(own_samba, tmp_path_factory):
    yield from balanced_pair(own_samba, own_samba, tmp_path_factory.mktemp("lb"))


def test_versions_written_through_haproxy_over_two_instances_interleave(behind_haproxy):
    a, b, lb = behind_haproxy
    s3 = lb.client()
    bucket = versioned_bucket(s3)
    # One at a time, round-robin over the two instances: the versions list
    # newest first in the order they were written, the last one latest.
    written = []
    for i in range(12):
        if i % 4 == 3:
            written.append(("marker", s3.delete_object(Bucket=bucket, Key="k")["VersionId"]))
        else:
            written.append(("version", s3.put_object(Bucket=bucket, Key="k", Body=b"v%d" % i)["VersionId"]))
    r = s3.list_object_versions(Bucket=bucket)
    listed = [("version", v["VersionId"], v["LastModified"]) for v in r.get("Versions", [])]
    listed += [("marker", m["VersionId"], m["LastModified"]) for m in r.get("DeleteMarkers", [])]
    latest = [v for v in r.get("Versions", []) + r.get("DeleteMarkers", []) if v["IsLatest"]]
    assert [x["VersionId"] for x in latest] == [written[-1][1]]
    assert sorted(v for _, v, _ in listed) == sorted(v for _, v in written)
    assert [v["VersionId"] for v in r["Versions"]] == [v for kind, v in reversed(written) if kind == "version"]
    # Both instances served writes.
    served = [sum(1 for line in open(g.access_log) if "PutObject" in line) for g in (a, b)]
    assert all(n > 0 for n in served), served
    # Concurrent writers through the balancer: one version per PUT.
    def put(i):
        c = lb.client()
        for n in range(5):
            c.put_object(Bucket=bucket, Key="hot", Body=b"%d-%d" % (i, n))
    threads = [threading.Thread(target=put, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = [v for v in all_versions(s3, bucket) if v["Key"] == "hot"]
    assert len(versions) == 30 and [v["IsLatest"] for v in versions].count(True) == 1
