"""The object cache (issue 24, part 1): HEAD and small GETs answered from
memory while Samba's lease on the file stands, and never stale after a
change anyone makes through SMB: smbclient writing or deleting the file,
another smbgate instance replacing, deleting or tagging it. Two gateways
run on one smbd of this module's own, so that `smbstatus -L` shows exactly
their opens."""

import hashlib
import os
import re
import subprocess
import threading
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway, _free_port, open_handles

MIB = 1 << 20


@pytest.fixture(scope="module")
def two(own_samba):
    port = _free_port()
    a = Gateway(own_samba, env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{port}", "SMBGATE_METRICS_TOKEN": "t"})
    a.admin = f"http://127.0.0.1:{port}"
    b = Gateway(own_samba)
    yield a, b
    a.stop()
    b.stop()


def metric(gw, series):
    req = urllib.request.Request(gw.admin + "/metrics", headers={"Authorization": "Bearer t"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return 0.0 if m is None else float(m.group(1))


def hits(gw):
    return metric(gw, 'smbgate_object_cache_lookups_total{result="hit"}')


def leased(samba, name):
    """`smbstatus -L` lines of opens of `name` that hold a lease."""
    return [l for l in open_handles(samba, name) if "LEASE(" in l]


def warm(gw, samba, bucket, key):
    """HEADs `key` through `gw` until the cache holds it (a leased open on the
    server) and a HEAD is answered from it."""
    s3 = gw.client()
    deadline = time.monotonic() + 10
    while True:
        before = hits(gw)
        info = s3.head_object(Bucket=bucket, Key=key)
        if hits(gw) > before and leased(samba, key):
            return info
        assert time.monotonic() < deadline, f"{key} never came from the cache: {open_handles(samba, key)}"
        time.sleep(0.05)


def test_a_warm_object_is_answered_from_memory_with_the_bytes_it_has(two, own_samba):
    a, _ = two
    s3 = a.client()
    s3.create_bucket(Bucket="warm")
    body = os.urandom(4096)
    etag = s3.put_object(Bucket="warm", Key="k.bin", Body=body, Metadata={"m": "v"})["ETag"]
    info = warm(a, own_samba, "warm", "k.bin")
    assert (info["ETag"], info["ContentLength"], info["Metadata"]) == (etag, 4096, {"m": "v"})
    assert any("LEASE(RH)" in l for l in leased(own_samba, "k.bin")), open_handles(own_samba, "k.bin")
    before = hits(a)
    got = s3.get_object(Bucket="warm", Key="k.bin")
    assert (got["Body"].read(), got["ETag"]) == (body, etag)
    part = s3.get_object(Bucket="warm", Key="k.bin", Range="bytes=100-199")
    assert (part["Body"].read(), part["ContentRange"]) == (body[100:200], "bytes 100-199/4096")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="warm", Key="k.bin", IfNoneMatch=etag)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    assert hits(a) >= before + 3, "the GETs came from the cache"


def test_a_file_smbclient_overwrites_is_seen_by_the_next_head_and_get(two, own_samba, tmp_path):
    a, _ = two
    s3 = a.client()
    s3.create_bucket(Bucket="smbclient")
    old = s3.put_object(Bucket="smbclient", Key="f.txt", Body=b"old contents")["ETag"]
    warm(a, own_samba, "smbclient", "f.txt")
    new = os.urandom(5000)
    (tmp_path / "new").write_bytes(new)
    own_samba.smbclient(f'put {tmp_path / "new"} smbclient/f.txt')
    info = s3.head_object(Bucket="smbclient", Key="f.txt")
    assert info["ContentLength"] == 5000 and info["ETag"] != old
    assert s3.get_object(Bucket="smbclient", Key="f.txt")["Body"].read() == new


def test_a_file_smbclient_deletes_is_gone_for_the_next_head(two, own_samba):
    a, _ = two
    s3 = a.client()
    s3.create_bucket(Bucket="smbdel")
    s3.put_object(Bucket="smbdel", Key="gone.txt", Body=b"x" * 100)
    warm(a, own_samba, "smbdel", "gone.txt")
    own_samba.smbclient("del smbdel/gone.txt")
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="smbdel", Key="gone.txt")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="smbdel", Key="gone.txt")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"


@pytest.mark.parametrize("size", [4096, 3 * MIB])
def test_a_put_through_the_other_instance_is_seen_at_once(two, own_samba, size):
    a, b = two
    bucket = f"pair-{size}"
    a.client().create_bucket(Bucket=bucket)
    for round_ in range(5):
        body = os.urandom(size)
        etag = b.client().put_object(Bucket=bucket, Key="obj", Body=body)["ETag"]
        assert etag == f'"{hashlib.md5(body).hexdigest()}"'
        assert warm(a, own_samba, bucket, "obj")["ETag"] == etag, round_
        got = a.client().get_object(Bucket=bucket, Key="obj")
        assert (got["ETag"], hashlib.md5(got["Body"].read()).hexdigest()) == (etag, etag.strip('"'))


def test_a_delete_and_a_tagging_through_the_other_instance_are_seen_at_once(two, own_samba):
    a, b = two
    a.client().create_bucket(Bucket="pairdel")
    a.client().put_object(Bucket="pairdel", Key="t", Body=b"tagged")
    warm(a, own_samba, "pairdel", "t")
    b.client().put_object_tagging(Bucket="pairdel", Key="t", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    got = a.client().get_object(Bucket="pairdel", Key="t")
    assert got.get("TagCount") == 1
    assert a.client().get_object_tagging(Bucket="pairdel", Key="t")["TagSet"] == [{"Key": "k", "Value": "v"}]
    warm(a, own_samba, "pairdel", "t")
    b.client().delete_object(Bucket="pairdel", Key="t")
    with pytest.raises(ClientError) as e:
        a.client().head_object(Bucket="pairdel", Key="t")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_a_replacement_during_a_get_stream_leaves_that_stream_whole(two, own_samba):
    a, b = two
    a.client().create_bucket(Bucket="stream")
    old = os.urandom(32 * MIB)
    a.client().put_object(Bucket="stream", Key="big", Body=old)
    warm(a, own_samba, "stream", "big")
    body = a.client().get_object(Bucket="stream", Key="big")["Body"]
    first = body.read(MIB)
    new = os.urandom(32 * MIB)
    etag = b.client().put_object(Bucket="stream", Key="big", Body=new)["ETag"]
    assert first + body.read() == old
    assert a.client().head_object(Bucket="stream", Key="big")["ETag"] == etag


def test_readers_keep_reading_while_two_instances_overwrite(two, own_samba):
    """HEAD and GET through A while B overwrites: every answer is one of
    the versions written, whole, and as soon as each write is answered, A
    answers that version."""
    a, b = two
    a.client().create_bucket(Bucket="churn")
    versions = {}
    stop = threading.Event()
    bad = []

    def read():
        s3 = a.client()
        while not stop.is_set():
            got = s3.get_object(Bucket="churn", Key="k")
            data = got["Body"].read()
            if versions.get(got["ETag"]) != data:
                bad.append(got["ETag"])

    body = os.urandom(2048)
    versions[b.client().put_object(Bucket="churn", Key="k", Body=body)["ETag"]] = body
    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    s3a, s3b = a.client(), b.client()
    stale = []
    for i in range(60):
        body = os.urandom(2048)
        etag = f'"{hashlib.md5(body).hexdigest()}"'
        versions[etag] = body
        s3b.put_object(Bucket="churn", Key="k", Body=body)
        seen = (s3a.head_object(Bucket="churn", Key="k")["ETag"], s3a.get_object(Bucket="churn", Key="k")["ETag"])
        if seen != (etag, etag):
            stale.append((i, seen, etag))
        time.sleep(0.01)
    stop.set()
    for t in readers:
        t.join()
    assert (bad, stale) == ([], [])


def test_with_the_cache_off_nothing_is_held(own_samba):
    g = Gateway(own_samba, "--cache", "off")
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="off")
        s3.put_object(Bucket="off", Key="cold", Body=b"c")
        for _ in range(5):
            assert s3.head_object(Bucket="off", Key="cold")["ContentLength"] == 1
        time.sleep(0.3)
        assert leased(own_samba, "cold") == []
    finally:
        g.stop()


def test_a_change_on_the_servers_own_disk_is_seen_within_the_max_age(own_samba):
    """A program on the server itself breaks no lease (Samba's kernel oplocks
    are off): such a change is seen at the latest once the entry is older
    than --cache-max-age (at once where the directory is watched:
    test_cache_watches.py)."""
    g = Gateway(own_samba, "--cache-max-age", "2s")
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="local")
        old = s3.put_object(Bucket="local", Key="disk.txt", Body=b"before")["ETag"]
        deadline = time.monotonic() + 10
        while not leased(own_samba, "disk.txt"):
            assert time.monotonic() < deadline
            s3.head_object(Bucket="local", Key="disk.txt")
            time.sleep(0.05)
        changed = time.monotonic()
        (own_samba.share_path / "local" / "disk.txt").write_bytes(b"after, and longer")
        while s3.head_object(Bucket="local", Key="disk.txt")["ETag"] == old:
            assert time.monotonic() - changed < 2.5, "still the old object past --cache-max-age"
            time.sleep(0.05)
        assert s3.get_object(Bucket="local", Key="disk.txt")["Body"].read() == b"after, and longer"
    finally:
        g.stop()


def test_an_entry_past_its_max_age_is_renewed_by_one_look_and_a_disk_change_still_shows(own_samba):
    """An object read again after a pause longer than --cache-max-age is
    answered from its entry once one look at its path finds the held file
    unchanged (the lookup counts as a hit, the same open stays), not filled
    again; a change made on the server's disk during such a pause is still
    seen by the first request after it."""
    port = _free_port()
    g = Gateway(own_samba, "--cache-max-age", "1s",
                env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{port}", "SMBGATE_METRICS_TOKEN": "t"})
    g.admin = f"http://127.0.0.1:{port}"
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="pause")
        body = os.urandom(1000)
        etag = s3.put_object(Bucket="pause", Key="p.bin", Body=body)["ETag"]
        s3.head_object(Bucket="pause", Key="p.bin")
        held = leased(own_samba, "p.bin")
        assert held, open_handles(own_samba, "p.bin")
        time.sleep(2.5)
        before = hits(g)
        got = s3.get_object(Bucket="pause", Key="p.bin")
        assert (got["Body"].read(), got["ETag"]) == (body, etag)
        assert hits(g) == before + 1, "an unchanged entry past its max age is renewed, not missed"
        assert leased(own_samba, "p.bin") == held, "the same open holds it"
        time.sleep(2.5)
        (own_samba.share_path / "pause" / "p.bin").write_bytes(b"changed on the server")
        assert s3.get_object(Bucket="pause", Key="p.bin")["Body"].read() == b"changed on the server"
    finally:
        g.stop()


def test_the_entries_are_bounded_and_the_oldest_goes_first(own_samba):
    g = Gateway(own_samba, "--cache-entries", "2")
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="bound")
        for i in range(5):
            s3.put_object(Bucket="bound", Key=f"b{i}", Body=b"x" * 100)
        for i in range(5):
            deadline = time.monotonic() + 10
            while not leased(own_samba, f"bound/b{i}"):
                assert time.monotonic() < deadline, f"b{i} never held"
                s3.head_object(Bucket="bound", Key=f"b{i}")
                time.sleep(0.05)
        # The evicted entries' CLOSEs reach smbd a moment later.
        deadline = time.monotonic() + 10
        while (held := sorted(f"b{i}" for i in range(5) if leased(own_samba, f"bound/b{i}"))) != ["b3", "b4"]:
            assert time.monotonic() < deadline, held
            time.sleep(0.05)
    finally:
        g.stop()


def test_one_head_holds_the_object_and_the_next_get_is_answered_from_memory(two, own_samba):
    """A HEAD's own open holds the file (no second round trip, no wait for a
    second miss): right after the first HEAD the server shows the lease, and
    the GET that follows comes from memory with the same bytes; an object
    larger than what a HEAD reads is held for its info only."""
    a, _ = two
    s3 = a.client()
    s3.create_bucket(Bucket="onehead")
    body = os.urandom(3000)
    etag = s3.put_object(Bucket="onehead", Key="small.bin", Body=body)["ETag"]
    s3.put_object(Bucket="onehead", Key="larger.bin", Body=os.urandom(40000))
    assert s3.head_object(Bucket="onehead", Key="small.bin")["ETag"] == etag
    assert [l for l in leased(own_samba, "small.bin") if "LEASE(RH)" in l], open_handles(own_samba, "small.bin")
    before = hits(a)
    got = s3.get_object(Bucket="onehead", Key="small.bin")
    assert (got["Body"].read(), got["ETag"]) == (body, etag)
    assert hits(a) == before + 1
    s3.head_object(Bucket="onehead", Key="larger.bin")
    assert leased(own_samba, "larger.bin"), open_handles(own_samba, "larger.bin")
    before = hits(a)
    assert s3.head_object(Bucket="onehead", Key="larger.bin")["ContentLength"] == 40000
    assert hits(a) == before + 1



def test_a_file_that_appears_after_a_put_saw_its_key_absent_is_warned_about(own_samba):
    """A small PUT whose case check found its key absent warns no holder and
    publishes with a rename that may not replace. Here B's CREATE answers
    are held back 1 s by a proxy, so that after B's check another PUT
    (through A) makes the key and A holds it; B's rename then meets the
    file, warns A's holder and replaces it. A answers B's bytes at once
    (with an unwarned replacing rename, A kept answering its own)."""
    from resetproxy import ResetProxy
    proxy = ResetProxy(own_samba.port)
    share = f"smb://127.0.0.1:{proxy.port}/{own_samba.env['SMB_SHARE']}"
    a, b = Gateway(own_samba), Gateway(own_samba, env={"SMBGATE_SHARE": share})
    try:
        # Made before the clock starts: a client takes a while to make.
        a_s3, b_s3 = a.client(), b.client()
        a_s3.create_bucket(Bucket="appears")
        b_body, a_body = os.urandom(3000), os.urandom(2000)
        proxy.create_delay = 1.0
        done = []
        t = threading.Thread(target=lambda: done.append(
            b_s3.put_object(Bucket="appears", Key="k", Body=b_body)["ETag"]))
        t.start()
        # B's bucket check answers at 1 s, its case check looks then and
        # answers at 2 s, its temp file's CREATE answers at 3 s: A writes
        # and holds the key in between.
        time.sleep(1.5)
        a_s3.put_object(Bucket="appears", Key="k", Body=a_body)
        a_s3.head_object(Bucket="appears", Key="k")
        assert [l for l in leased(own_samba, "k") if "LEASE(RH)" in l], open_handles(own_samba, "k")
        assert not done, "B's PUT ended before A's write: the proxy's delay did not hold it"
        t.join()
        etag = f'"{hashlib.md5(b_body).hexdigest()}"'
        assert done == [etag]
        assert (own_samba.share_path / "appears" / "k").read_bytes() == b_body
        assert a.client().head_object(Bucket="appears", Key="k")["ETag"] == etag
        assert a.client().get_object(Bucket="appears", Key="k")["Body"].read() == b_body
    finally:
        proxy.create_delay = 0.0
        a.stop()
        b.stop()
        proxy.stop()
