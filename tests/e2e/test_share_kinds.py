"""Shares configured the way NAS appliances ship them (issue 12, point 4;
failure class 27).

- `vfs objects = catia fruit streams_xattr` (macOS-friendly shares, as many
  NAS ship), and `ea support = no` (no extended attributes, as on Azure
  Files and several NAS) with and without `vfs objects = streams_xattr`: a
  representative part of the object suite runs on each: PUT/GET/HEAD with
  metadata, multipart, copy, listing, delete.
- Without EAs but with streams (`streams_xattr`) the records live in a
  named stream of each file, `file:smbgate.meta`.
- Without either, the records live in sidecar files under `.smbgate/meta`,
  found by the file's on-disk id: they survive a restart, follow renames
  and overwrites, go with deletes, and never describe a file someone else
  put in the object's place.
"""

import hashlib
import io
import os
import time
import uuid

import pytest
from boto3.s3.transfer import TransferConfig

from conftest import Gateway, Samba, put_on_share

MIB = 1 << 20

KINDS = {
    "fruit": ["vfs objects = catia fruit streams_xattr"],
    "no-eas": ["ea support = no"],
    "streams-no-eas": ["ea support = no", "vfs objects = streams_xattr"],
}


def share_options(kind):
    return [a for o in KINDS[kind] for a in ("--share-option", o)]


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind_gw(request):
    s = Samba(*share_options(request.param))
    g = Gateway(s)
    yield g, s, request.param
    g.stop()
    s.stop()


def logged_gateway(kind):
    """A share of `kind` and a gateway on it that logs at INFO."""
    s = Samba(*share_options(kind))
    g = Gateway(s, env={"SMBGATE_LOG": "info"})
    yield g, s
    g.stop()
    s.stop()


@pytest.fixture(scope="module")
def no_ea_gw():
    yield from logged_gateway("no-eas")


def test_objects_on_each_share_kind(kind_gw):
    g, samba, kind = kind_gw
    s3 = g.client()
    bucket = f"{kind}-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(300_000)
    r = s3.put_object(Bucket=bucket, Key="docs/a b.txt", Body=body, ContentType="text/plain",
                      Metadata={"owner": "ops"})
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    h = s3.head_object(Bucket=bucket, Key="docs/a b.txt")
    assert (h["ContentType"], h["Metadata"], h["ETag"]) == ("text/plain", {"owner": "ops"}, r["ETag"])
    g_ = s3.get_object(Bucket=bucket, Key="docs/a b.txt")
    assert (g_["Body"].read(), g_["ETag"], g_["Metadata"]) == (body, r["ETag"], {"owner": "ops"})
    assert (samba.share_path / bucket / "docs" / "a b.txt").read_bytes() == body

    small = b"tiny body"
    t = s3.put_object(Bucket=bucket, Key="small.txt", Body=small, Metadata={"k": "v"}, ContentLanguage="en")
    assert t["ETag"] == '"%s"' % hashlib.md5(small).hexdigest()
    h = s3.head_object(Bucket=bucket, Key="small.txt")
    assert (h["Metadata"], h["ContentLanguage"], h["ETag"]) == ({"k": "v"}, "en", t["ETag"])

    s3.copy_object(Bucket=bucket, Key="copy.txt", CopySource={"Bucket": bucket, "Key": "docs/a b.txt"})
    c = s3.head_object(Bucket=bucket, Key="copy.txt")
    assert (c["ETag"], c["Metadata"]) == (r["ETag"], {"owner": "ops"})

    big = os.urandom(12 * MIB)
    s3.upload_fileobj(io.BytesIO(big), bucket, "mp/big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB))
    m = s3.head_object(Bucket=bucket, Key="mp/big.bin")
    md5s = b"".join(hashlib.md5(big[i:i + 5 * MIB]).digest() for i in range(0, len(big), 5 * MIB))
    assert m["ETag"] == '"%s-3"' % hashlib.md5(md5s).hexdigest()
    assert s3.get_object(Bucket=bucket, Key="mp/big.bin")["Body"].read() == big
    assert s3.head_object(Bucket=bucket, Key="mp/big.bin", PartNumber=2)["ContentLength"] == 5 * MIB

    s3.put_object(Bucket=bucket, Key="folder/", Body=b"", Metadata={"marker": "yes"})
    assert s3.head_object(Bucket=bucket, Key="folder/")["Metadata"] == {"marker": "yes"}

    listed = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed == {"copy.txt": r["ETag"], "docs/a b.txt": r["ETag"], "folder/": '"d41d8cd98f00b204e9800998ecf8427e"',
                      "mp/big.bin": m["ETag"], "small.txt": t["ETag"]}
    d = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in d["CommonPrefixes"]] == ["docs/", "folder/", "mp/"]
    assert [o["Key"] for o in d["Contents"]] == ["copy.txt", "small.txt"]
    for k in listed:
        s3.delete_object(Bucket=bucket, Key=k)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    s3.delete_bucket(Bucket=bucket)


def sidecars(samba):
    return sorted(p.name for p in (samba.share_path / ".smbgate" / "meta").glob("*/*"))


def goes(samba, name, within=15):
    """True once sidecar `name` is gone: a replaced or deleted file's record
    stays a few seconds for readers that opened the file just before."""
    deadline = time.time() + within
    while name in sidecars(samba):
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_without_eas_the_share_is_probed_and_logged(no_ea_gw):
    g, samba = no_ea_gw
    log = open(g.log.name).read()
    opened = [ln for ln in log.splitlines() if "store opened" in ln]
    assert len(opened) == 1 and 'metadata="sidecar files under .smbgate/meta"' in opened[0], log
    assert (samba.share_path / ".smbgate" / "meta").is_dir()


def test_sidecar_records_follow_overwrites_and_deletes(no_ea_gw):
    g, samba = no_ea_gw
    s3 = g.client()
    bucket = f"side-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    before = set(sidecars(samba))
    path = samba.share_path / bucket / "k"
    s3.put_object(Bucket=bucket, Key="k", Body=b"one", Metadata={"v": "1"})
    first = "%016x" % path.stat().st_ino
    assert first in sidecars(samba)
    s3.put_object(Bucket=bucket, Key="k", Body=b"two", Metadata={"v": "2"})
    h = s3.head_object(Bucket=bucket, Key="k")
    assert (h["Metadata"], h["ETag"]) == ({"v": "2"}, '"%s"' % hashlib.md5(b"two").hexdigest())
    ino = path.stat().st_ino
    assert "%016x" % ino in sidecars(samba)
    assert goes(samba, first), "the replaced version's record went with it"
    # The same through the streaming path, and through If-Match.
    s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(300_000), Metadata={"v": "3"})
    assert goes(samba, "%016x" % ino)
    ino = path.stat().st_ino
    etag = s3.head_object(Bucket=bucket, Key="k")["ETag"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"four", IfMatch=etag, Metadata={"v": "4"})
    assert s3.head_object(Bucket=bucket, Key="k")["Metadata"] == {"v": "4"}
    assert goes(samba, "%016x" % ino)
    ino = path.stat().st_ino
    s3.delete_object(Bucket=bucket, Key="k")
    assert goes(samba, "%016x" % ino), "a delete takes its record along"

    # An upload's record and its parts' records are sidecars too.
    up = s3.create_multipart_upload(Bucket=bucket, Key="m", Metadata={"who": "mp"})
    p1 = s3.upload_part(Bucket=bucket, Key="m", UploadId=up["UploadId"], PartNumber=1, Body=b"x" * (5 * MIB))
    p2 = s3.upload_part(Bucket=bucket, Key="m", UploadId=up["UploadId"], PartNumber=2, Body=b"tail")
    parts = s3.list_parts(Bucket=bucket, Key="m", UploadId=up["UploadId"])["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, p1["ETag"], 5 * MIB), (2, p2["ETag"], 4)]
    ups = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("m", up["UploadId"])]
    s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}, {"PartNumber": 2, "ETag": p2["ETag"]}]})
    assert s3.head_object(Bucket=bucket, Key="m")["Metadata"] == {"who": "mp"}
    s3.delete_object(Bucket=bucket, Key="m")
    s3.delete_bucket(Bucket=bucket)
    deadline = time.time() + 15
    while set(sidecars(samba)) - before and time.time() < deadline:
        time.sleep(0.2)
    assert set(sidecars(samba)) - before == set(), "nothing the bucket's objects left behind"


def test_sidecar_records_survive_a_restart(no_ea_gw):
    g, samba = no_ea_gw
    s3 = g.client()
    bucket = f"keep-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    r = s3.put_object(Bucket=bucket, Key="a/b", Body=b"kept", ContentType="x/y", Metadata={"m": "n"})
    other = Gateway(samba)
    try:
        h = other.client().head_object(Bucket=bucket, Key="a/b")
        assert (h["ETag"], h["ContentType"], h["Metadata"]) == (r["ETag"], "x/y", {"m": "n"})
    finally:
        other.stop()


def test_a_file_put_in_an_objects_place_is_not_described_by_its_record(no_ea_gw):
    g, samba = no_ea_gw
    s3 = g.client()
    bucket = f"foreign-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="f", Body=b"same size", Metadata={"ours": "1"})
    path = samba.share_path / bucket / "f"
    # Replaced by a new file of the same size, as an SMB user's editor
    # saves: another file (CreationTime and usually inode) in its place.
    path.unlink()
    put_on_share(samba, bucket, "f", b"SAME SIZE")
    h = s3.head_object(Bucket=bucket, Key="f")
    assert h["Metadata"] == {}
    assert h["ETag"] != '"%s"' % hashlib.md5(b"same size").hexdigest()
    assert h["ETag"].endswith('-1"'), h["ETag"]
    assert s3.get_object(Bucket=bucket, Key="f")["Body"].read() == b"SAME SIZE"


def test_a_foreign_files_tags_survive_its_access_time_moving(no_ea_gw):
    """A sidecar names its file by id and CreationTime. Samba reports a file
    it did not create (no stored DOS attributes) as created at the earliest
    of its access, write and change times, so a read on the share would
    move that CreationTime and orphan the record, unless the record's write
    fixes it first."""
    g, samba = no_ea_gw
    s3 = g.client()
    bucket = f"atime-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    path = put_on_share(samba, bucket, "f.bin", b"from the share")
    mtime = path.stat().st_mtime_ns
    os.utime(path, ns=(mtime - 10**9, mtime))  # last read before the last write
    etag = s3.head_object(Bucket=bucket, Key="f.bin")["ETag"]
    s3.put_object_tagging(Bucket=bucket, Key="f.bin", Tagging={"TagSet": [{"Key": "c", "Value": "3"}]})
    os.utime(path, ns=(time.time_ns(), mtime))  # read on the share now
    assert s3.get_object_tagging(Bucket=bucket, Key="f.bin")["TagSet"] == [{"Key": "c", "Value": "3"}]
    assert s3.head_object(Bucket=bucket, Key="f.bin")["ETag"] == etag


@pytest.fixture(scope="module")
def stream_gw():
    yield from logged_gateway("streams-no-eas")


STREAM_XATTR = "user.DosStream.smbgate.meta:$DATA"


def test_with_streams_and_no_eas_records_are_streams_of_their_files(stream_gw):
    g, samba = stream_gw
    opened = [ln for ln in open(g.log.name).read().splitlines() if "store opened" in ln]
    assert len(opened) == 1 and 'metadata="alternate data streams"' in opened[0], opened
    s3 = g.client()
    bucket = f"streams-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a/b.txt", Body=b"streamed", Metadata={"s": "1"})
    s3.put_object(Bucket=bucket, Key="dir/", Body=b"", Metadata={"m": "2"})
    path = samba.share_path / bucket / "a" / "b.txt"
    # streams_xattr keeps a stream in an xattr of its file, so it moves,
    # and goes, with the file.
    assert STREAM_XATTR in os.listxattr(path)
    assert b'"s":"1"' in os.getxattr(path, STREAM_XATTR)
    assert STREAM_XATTR in os.listxattr(samba.share_path / bucket / "dir")
    assert not (samba.share_path / ".smbgate" / "meta").exists()
    # Overwrites replace the stream with the file; readers see the new one.
    s3.put_object(Bucket=bucket, Key="a/b.txt", Body=b"again", Metadata={"s": "3"})
    h = s3.head_object(Bucket=bucket, Key="a/b.txt")
    assert (h["Metadata"], h["ETag"]) == ({"s": "3"}, '"%s"' % hashlib.md5(b"again").hexdigest())
    # A marker PUT again over an existing directory keeps it a marker.
    s3.put_object(Bucket=bucket, Key="dir/", Body=b"", Metadata={"m": "a longer value than before"})
    assert s3.head_object(Bucket=bucket, Key="dir/")["Metadata"] == {"m": "a longer value than before"}
    s3.put_object(Bucket=bucket, Key="dir/", Body=b"", Metadata={"m": "3"})
    assert s3.head_object(Bucket=bucket, Key="dir/")["Metadata"] == {"m": "3"}
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["a/b.txt", "dir/"]


def test_tags_on_each_share_kind(kind_gw):
    """Tags live in the record, wherever the share keeps it (EA, named
    stream, sidecar), and tagging leaves the ETag alone."""
    g, samba, kind = kind_gw
    s3 = g.client()
    bucket = f"tags-{kind}-{uuid.uuid4().hex[:6]}"
    s3.create_bucket(Bucket=bucket)
    put = s3.put_object(Bucket=bucket, Key="t.txt", Body=b"tagged", Tagging="a=1")
    assert s3.get_object_tagging(Bucket=bucket, Key="t.txt")["TagSet"] == [{"Key": "a", "Value": "1"}]
    before = s3.head_object(Bucket=bucket, Key="t.txt")["LastModified"]
    time.sleep(1.1)  # a moved LastWriteTime would show in Last-Modified
    s3.put_object_tagging(Bucket=bucket, Key="t.txt", Tagging={"TagSet": [{"Key": "b", "Value": "2"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="t.txt")["TagSet"] == [{"Key": "b", "Value": "2"}]
    after = s3.head_object(Bucket=bucket, Key="t.txt")
    assert (after["ETag"], after["LastModified"]) == (put["ETag"], before)
    foreign = put_on_share(samba, bucket, "foreign.bin", b"from the share")
    etag = s3.head_object(Bucket=bucket, Key="foreign.bin")["ETag"]
    s3.put_object_tagging(Bucket=bucket, Key="foreign.bin", Tagging={"TagSet": [{"Key": "c", "Value": "3"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="foreign.bin")["TagSet"] == [{"Key": "c", "Value": "3"}]
    assert s3.head_object(Bucket=bucket, Key="foreign.bin")["ETag"] == etag
    assert foreign.read_bytes() == b"from the share"
    s3.delete_object(Bucket=bucket, Key="t.txt")
    s3.put_object(Bucket=bucket, Key="t.txt", Body=b"again")
    assert s3.get_object_tagging(Bucket=bucket, Key="t.txt")["TagSet"] == []
