"""A key and a longer key under it coexist, as on S3 (issue 11, item 24):
`foo/bar` and `foo/bar/baz` in either order, and a key ending in `/` may
have a body. On the share the object whose name is also a directory is the
file `bar` + U+F02B beside the directory `bar` (a marker with a body: two
marks); once the longer keys are gone it takes its plain name back. Every
operation treats it as an ordinary object: GET, HEAD, listings in S3 order
(with and without a delimiter, paged), conditional writes, copies,
multipart, deletes."""

import collections
import concurrent.futures
import hashlib
import io
import os
import threading

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from s3util import expect_error, files_under, md5_etag, s3_error, status, wait_no_tmp

MARK = chr(0xF02B)


def keys(s3, bucket, **kw):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, **kw).get("Contents", [])]


def body(s3, bucket, key, **kw):
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def test_key_then_longer_key(s3, bucket, samba):
    r = s3.put_object(Bucket=bucket, Key="foo/bar", Body=b"file", ContentType="text/x-bar", Metadata={"k": "v"})
    etag = r["ETag"]
    assert status(s3.put_object(Bucket=bucket, Key="foo/bar/baz", Body=b"deeper")) == 200
    assert body(s3, bucket, "foo/bar") == b"file"
    assert body(s3, bucket, "foo/bar/baz") == b"deeper"
    h = s3.head_object(Bucket=bucket, Key="foo/bar")
    assert (h["ETag"], h["ContentLength"], h["ContentType"], h["Metadata"]) == (etag, 4, "text/x-bar", {"k": "v"})
    assert body(s3, bucket, "foo/bar", Range="bytes=1-2") == b"il"
    # What people on the share see: the directory, and the object beside it.
    root = samba.share_path / bucket
    assert (root / "foo" / "bar").is_dir()
    assert (root / "foo" / ("bar" + MARK)).read_bytes() == b"file"
    assert keys(s3, bucket) == ["foo/bar", "foo/bar/baz"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="foo/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["foo/bar"]
    assert [o["ETag"] for o in r["Contents"]] == [etag]
    assert r["CommonPrefixes"] == [{"Prefix": "foo/bar/"}]
    # The longer key goes: the object takes its plain name back.
    assert status(s3.delete_object(Bucket=bucket, Key="foo/bar/baz")) == 204
    assert body(s3, bucket, "foo/bar") == b"file"
    assert (root / "foo" / "bar").read_bytes() == b"file"
    assert files_under(root) == ["foo", "foo/bar"]
    assert s3.head_object(Bucket=bucket, Key="foo/bar")["ETag"] == etag
    assert status(s3.delete_object(Bucket=bucket, Key="foo/bar")) == 204
    assert keys(s3, bucket) == []
    assert files_under(root) == []
    assert wait_no_tmp(samba) == []


def test_longer_key_then_key(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="p/q", Body=b"inner")
    assert status(s3.put_object(Bucket=bucket, Key="p", Body=b"outer")) == 200
    assert body(s3, bucket, "p") == b"outer"
    assert body(s3, bucket, "p/q") == b"inner"
    assert keys(s3, bucket) == ["p", "p/q"]
    root = samba.share_path / bucket
    assert (root / ("p" + MARK)).read_bytes() == b"outer"
    # Overwritten in place beside the directory.
    s3.put_object(Bucket=bucket, Key="p", Body=b"outer 2")
    assert body(s3, bucket, "p") == b"outer 2"
    # Deleting the shorter key leaves the longer one, and no stray name.
    assert status(s3.delete_object(Bucket=bucket, Key="p")) == 204
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="p")
    assert body(s3, bucket, "p/q") == b"inner"
    assert files_under(root) == ["p", "p/q"]
    s3.delete_object(Bucket=bucket, Key="p/q")
    assert keys(s3, bucket) == [] and files_under(root) == []


# S3 order: "a/b" < "a/b!" < "a/b-" < "a/b.txt" < "a/b/" < "a/b/c" < "a/b0".
ORDERED = ["a/b", "a/b!", "a/b-", "a/b.txt", "a/b/", "a/b/c", "a/b/c/d", "a/b0"]


@pytest.mark.parametrize("order", ["short-first", "long-first"])
def test_listing_order_paging_and_delimiters(s3, bucket, order):
    for k in sorted(ORDERED, reverse=order == "long-first"):
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    assert keys(s3, bucket) == ORDERED
    for k in ORDERED:
        assert body(s3, bucket, k) == k.encode(), k
    # One key a page: the continuation tokens follow S3 order too.
    paged, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = s3.list_objects_v2(Bucket=bucket, MaxKeys=1, **kw)
        paged += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    assert paged == ORDERED
    assert keys(s3, bucket, StartAfter="a/b") == ORDERED[1:]
    assert keys(s3, bucket, StartAfter="a/b/") == ORDERED[5:]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/b", "a/b!", "a/b-", "a/b.txt", "a/b0"]
    assert r["CommonPrefixes"] == [{"Prefix": "a/b/"}]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/b/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/b/", "a/b/c"]
    assert r["CommonPrefixes"] == [{"Prefix": "a/b/c/"}]
    assert keys(s3, bucket, Prefix="a/b/c") == ["a/b/c", "a/b/c/d"]
    r = s3.list_objects(Bucket=bucket, Prefix="a/b", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/b", "a/b!", "a/b-", "a/b.txt", "a/b0"]
    assert r["CommonPrefixes"] == [{"Prefix": "a/b/"}]
    for k in ORDERED:
        assert status(s3.delete_object(Bucket=bucket, Key=k)) == 204
    assert keys(s3, bucket) == []


def test_conditional_writes_on_a_key_kept_beside(s3, bucket):
    s3.put_object(Bucket=bucket, Key="c/d/e", Body=b"e")
    etag = s3.put_object(Bucket=bucket, Key="c/d", Body=b"one")["ETag"]
    expect_error(412, "PreconditionFailed", s3.put_object, Bucket=bucket, Key="c/d", Body=b"x", IfNoneMatch="*")
    expect_error(412, "PreconditionFailed", s3.put_object, Bucket=bucket, Key="c/d", Body=b"x", IfMatch=md5_etag(b"x"))
    r = s3.put_object(Bucket=bucket, Key="c/d", Body=b"two", IfMatch=etag)
    assert r["ETag"] == md5_etag(b"two")
    assert body(s3, bucket, "c/d") == b"two"
    # Absent beside an existing directory: created if absent, 404 for If-Match.
    s3.put_object(Bucket=bucket, Key="n/x", Body=b"x")
    expect_error(404, "NoSuchKey", s3.put_object, Bucket=bucket, Key="n", Body=b"n", IfMatch=md5_etag(b"x"))
    assert status(s3.put_object(Bucket=bucket, Key="n", Body=b"n", IfNoneMatch="*")) == 200
    assert body(s3, bucket, "n") == b"n"
    # A conditional delete reads the ETag of the object beside.
    expect_error(412, "PreconditionFailed", s3.delete_object, Bucket=bucket, Key="c/d", IfMatch=etag)
    assert status(s3.delete_object(Bucket=bucket, Key="c/d", IfMatch=md5_etag(b"two"))) == 204
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="c/d")
    assert keys(s3, bucket) == ["c/d/e", "n", "n/x"]


def test_copies_and_multipart(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="f", Body=b"file")
    s3.put_object(Bucket=bucket, Key="src", Body=b"src")
    # Copy under an object: the object moves beside the new directory.
    s3.copy_object(Bucket=bucket, Key="f/child", CopySource={"Bucket": bucket, "Key": "src"})
    # Copy onto an object kept beside, and from it.
    s3.copy_object(Bucket=bucket, Key="f", CopySource={"Bucket": bucket, "Key": "src"})
    s3.copy_object(Bucket=bucket, Key="g", CopySource={"Bucket": bucket, "Key": "f"})
    assert [body(s3, bucket, k) for k in ("f", "f/child", "g")] == [b"src"] * 3
    # Multipart under an object, and onto a key that is a directory.
    part = b"m" * (5 << 20)
    s3.put_object(Bucket=bucket, Key="h", Body=b"h")
    for key in ("h/mp", "f"):
        uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        e1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=part)["ETag"]
        e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2, Body=b"tail")["ETag"]
        r = s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
        assert r["ETag"].endswith('-2"'), r
        assert hashlib.md5(body(s3, bucket, key)).hexdigest() == hashlib.md5(part + b"tail").hexdigest()
    assert body(s3, bucket, "h") == b"h"
    assert keys(s3, bucket) == ["f", "f/child", "g", "h", "h/mp", "src"]
    # A large object (split streaming reads it by its path) beside a directory.
    cfg = TransferConfig(multipart_threshold=64 << 20)
    big = bytes(range(256)) * (40 << 12)  # 40 MiB
    s3.upload_fileobj(io.BytesIO(big), bucket, "h", Config=cfg)
    assert body(s3, bucket, "h") == big
    assert wait_no_tmp(samba) == []


def test_marker_with_a_body(s3, bucket, samba):
    r = s3.put_object(Bucket=bucket, Key="photos/", Body=b"abc", ContentType="text/plain")
    assert r["ETag"] == md5_etag(b"abc")
    assert body(s3, bucket, "photos/") == b"abc"
    h = s3.head_object(Bucket=bucket, Key="photos/")
    assert (h["ContentLength"], h["ETag"], h["ContentType"]) == (3, md5_etag(b"abc"), "text/plain")
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="photos")
    root = samba.share_path / bucket
    assert (root / ("photos" + MARK + MARK)).read_bytes() == b"abc"
    s3.put_object(Bucket=bucket, Key="photos/x", Body=b"x")
    assert keys(s3, bucket) == ["photos/", "photos/x"]
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert r.get("Contents", []) == [] and r["CommonPrefixes"] == [{"Prefix": "photos/"}]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="photos/", Delimiter="/")
    assert [(o["Key"], o["Size"], o["ETag"]) for o in r["Contents"]] == [
        ("photos/", 3, md5_etag(b"abc")), ("photos/x", 1, md5_etag(b"x"))]
    # Empty again: the directory's own record, and the body is gone.
    s3.put_object(Bucket=bucket, Key="photos/", Body=b"")
    assert body(s3, bucket, "photos/") == b""
    assert not (root / ("photos" + MARK + MARK)).exists()
    # And a body once more, over the empty marker.
    s3.put_object(Bucket=bucket, Key="photos/", Body=b"again")
    assert body(s3, bucket, "photos/") == b"again"
    assert keys(s3, bucket) == ["photos/", "photos/x"]
    assert status(s3.delete_object(Bucket=bucket, Key="photos/")) == 204
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key="photos/")
    assert keys(s3, bucket) == ["photos/x"]
    s3.delete_object(Bucket=bucket, Key="photos/x")
    assert keys(s3, bucket) == [] and files_under(root) == []
    # A marker with a body and an object of the same name, side by side.
    s3.put_object(Bucket=bucket, Key="both", Body=b"object")
    s3.put_object(Bucket=bucket, Key="both/", Body=b"marker")
    assert (body(s3, bucket, "both"), body(s3, bucket, "both/")) == (b"object", b"marker")
    assert keys(s3, bucket) == ["both", "both/"]
    s3.delete_object(Bucket=bucket, Key="both/")
    s3.delete_object(Bucket=bucket, Key="both")
    assert keys(s3, bucket) == [] and files_under(root) == []
    assert wait_no_tmp(samba) == []


def test_beside_names_are_not_keys(s3, bucket):
    expect_error(400, "InvalidArgument", s3.put_object, Bucket=bucket, Key="x" + MARK, Body=b"x")
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key="x" + MARK)


def test_copy_and_multipart_onto_a_marker(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    s3.put_object(Bucket=bucket, Key="m/", Body=b"")
    s3.copy_object(Bucket=bucket, Key="m/", CopySource={"Bucket": bucket, "Key": "src"})
    assert body(s3, bucket, "m/") == b"source"
    uid = s3.create_multipart_upload(Bucket=bucket, Key="up/")["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="up/", UploadId=uid, PartNumber=1, Body=b"part")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="up/", UploadId=uid,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    assert body(s3, bucket, "up/") == b"part"
    s3.copy_object(Bucket=bucket, Key="back", CopySource={"Bucket": bucket, "Key": "up/"})
    assert body(s3, bucket, "back") == b"part"
    assert keys(s3, bucket) == ["back", "m/", "src", "up/"]


def test_a_name_too_long_to_mark_keeps_the_old_conflict(s3, bucket, samba):
    # 253 bytes of UTF-8 fit a Linux name; with the 3-byte mark they do not.
    name = "L" * 253
    s3.put_object(Bucket=bucket, Key=name, Body=b"long")
    st, code, r = s3_error(s3.put_object, Bucket=bucket, Key=name + "/x", Body=b"x")
    assert (st, code) == (409, "KeyConflict"), r
    assert body(s3, bucket, name) == b"long"
    assert (samba.share_path / bucket / name).read_bytes() == b"long"
    assert keys(s3, bucket) == [name]
    assert wait_no_tmp(samba) == []


def test_readers_never_miss_a_key_while_it_moves(gateway, bucket):
    """Readers and a lister race a writer that keeps creating and deleting a
    key under `r/k`, so the object moves beside its directory and back,
    again and again: every read gets the whole body, never a 404; every
    listing shows the object once with its size and ETag, or, for the
    instant of a rename within its directory, not at all. (Samba keeps a
    removed directory that a handle still holds, and answers an open of it
    as an empty file: the first cut of this returned it, and lost the object
    when it took that for a newer version.)"""
    data = os.urandom(100_000)
    writer, readers = gateway.client(), [gateway.client() for _ in range(3)]
    writer.put_object(Bucket=bucket, Key="r/k", Body=data)
    done = threading.Event()
    seen, gaps, listings = [], [], []

    def read(c):
        n = 0
        while not done.is_set() and n < 2000:
            n += 1
            try:
                got = c.get_object(Bucket=bucket, Key="r/k")["Body"].read()
                seen.append(200 if got == data else ("torn", len(got)))
                h = c.head_object(Bucket=bucket, Key="r/k")
                seen.append((h["ContentLength"], h["ETag"]) == (len(data), md5_etag(data)) or ("head", h["ETag"]))
            except ClientError as e:
                seen.append(e.response["ResponseMetadata"]["HTTPStatusCode"])

    def list_all(c):
        n = 0
        while not done.is_set() and n < 2000:
            n += 1
            listed = [(o["Key"], o["Size"], o["ETag"]) for o in c.list_objects_v2(Bucket=bucket).get("Contents", [])]
            listings.append(listed)
            # The object first, once, as written; or, for the instant it is
            # renamed within its directory, not at all (a directory read
            # may miss an entry renamed meanwhile, as for If-Match swaps).
            if not any(k == "r/k" for k, _, _ in listed):
                gaps.append(listed)
            else:
                ok = listed[:1] == [("r/k", len(data), md5_etag(data))] and [k for k, _, _ in listed].count("r/k") == 1
                seen.append(ok or ("listed", listed))

    threads = [threading.Thread(target=read, args=(c,)) for c in readers]
    threads.append(threading.Thread(target=list_all, args=(gateway.client(),)))
    for t in threads:
        t.start()
    try:
        for i in range(30):
            writer.put_object(Bucket=bucket, Key=f"r/k/x{i}", Body=b"x")
            writer.delete_object(Bucket=bucket, Key=f"r/k/x{i}")
    finally:
        done.set()
        for t in threads:
            t.join()
    bad = [s for s in seen if s not in (200, True)]
    assert bad == [], (collections.Counter(map(str, seen)), bad[:10])
    assert len(seen) > 30
    assert len(gaps) * 10 < len(listings), (len(gaps), len(listings), gaps[:3])
    assert body(writer, bucket, "r/k") == data
    assert keys(writer, bucket) == ["r/k"]


@pytest.mark.parametrize("key", ["y" * 255, "d/" + "y" * 255, "y" * 255 + "/"], ids=["plain", "nested", "marker"])
def test_names_with_no_room_for_the_mark(s3, bucket, key):
    # Nothing can be kept beside a name at the server's limit: looking
    # there finds nothing, rather than failing.
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key=key)
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key=key)
    assert status(s3.delete_object(Bucket=bucket, Key=key)) == 204
    s3.put_object(Bucket=bucket, Key=key, Body=b"")
    assert body(s3, bucket, key) == b""
    assert keys(s3, bucket) == [key]
    assert status(s3.delete_object(Bucket=bucket, Key=key)) == 204
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=bucket, Key=key)
    assert keys(s3, bucket) == []


def _together(*calls):
    """Runs the calls at once; returns their results (or ClientErrors)."""
    def run(call):
        try:
            return call()
        except ClientError as e:
            return e
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as ex:
        return list(ex.map(run, calls))


def test_parallel_uploads_under_an_existing_object(gateway, bucket):
    """Tools that upload a tree in parallel create many keys under one
    prefix at once; when the prefix is an object, every upload moves it (or
    finds it moved) and all succeed."""
    clients = [gateway.client() for _ in range(8)]
    for round in range(3):
        top = f"up{round}"
        clients[0].put_object(Bucket=bucket, Key=top, Body=b"top")
        results = _together(*[
            (lambda c=c, i=i: c.put_object(Bucket=bucket, Key=f"{top}/f{i}", Body=b"%d" % i))
            for i, c in enumerate(clients)])
        assert [status(r) if isinstance(r, dict) else r for r in results] == [200] * len(clients)
        assert body(clients[0], bucket, top) == b"top"
        assert keys(clients[0], bucket, Prefix=top) == [top] + sorted(f"{top}/f{i}" for i in range(8))


def test_writes_of_the_key_racing_its_moves_keep_the_last_write(gateway, bucket):
    """A writer overwrites `w/k` while another creates and deletes a key
    under it, so that the object keeps moving beside its directory and back:
    every overwrite lands, and what is read at the end is the last one."""
    writer, mover = gateway.client(), gateway.client()
    last = b"v0"
    writer.put_object(Bucket=bucket, Key="w/k", Body=last)
    for i in range(20):
        new = b"v%d" % (i + 1)
        put, _ = _together(
            lambda: writer.put_object(Bucket=bucket, Key="w/k", Body=new),
            lambda: (mover.put_object(Bucket=bucket, Key=f"w/k/x{i}", Body=b"x"),
                     mover.delete_object(Bucket=bucket, Key=f"w/k/x{i}")),
        )
        assert status(put) == 200, put
        last = new
        assert body(writer, bucket, "w/k") == last, i
    assert keys(writer, bucket) == ["w/k"]


def test_if_match_racing_a_key_created_under_it(gateway, bucket):
    """An If-Match swap of `s/k` races a PUT of `s/k/c`, which makes `s\\k`
    a directory: the swap's result is beside it, never lost."""
    swapper, child = gateway.client(), gateway.client()
    etag = swapper.put_object(Bucket=bucket, Key="s/k", Body=b"s0")["ETag"]
    current = b"s0"
    for i in range(15):
        new = b"s%d" % (i + 1)
        swap, made = _together(
            lambda: swapper.put_object(Bucket=bucket, Key="s/k", Body=new, IfMatch=etag),
            lambda: child.put_object(Bucket=bucket, Key=f"s/k/c{i}", Body=b"c"),
        )
        assert status(made) == 200, made
        if isinstance(swap, dict):
            etag, current = swap["ETag"], new
        else:
            assert swap.response["ResponseMetadata"]["HTTPStatusCode"] == 503, swap.response
        assert body(swapper, bucket, "s/k") == current, i
        child.delete_object(Bucket=bucket, Key=f"s/k/c{i}")
        assert body(swapper, bucket, "s/k") == current, i


def test_empty_and_body_markers_racing(gateway, bucket):
    a, b = gateway.client(), gateway.client()
    for i in range(15):
        results = _together(
            lambda: a.put_object(Bucket=bucket, Key="m/", Body=b""),
            lambda: b.put_object(Bucket=bucket, Key="m/", Body=b"body"),
        )
        assert [status(r) for r in results] == [200, 200], results
        assert body(a, bucket, "m/") in (b"", b"body"), i
        assert keys(a, bucket) == ["m/"]
