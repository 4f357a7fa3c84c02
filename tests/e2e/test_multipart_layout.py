"""How multipart parts are laid out on the share: uniform parts go straight
into one data file (Complete is a rename), anything else falls back to a
server-side concatenation. Either way the bytes and ETag are exact."""

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

MIB = 1 << 20


def _etag(parts):
    return '"%s-%d"' % (hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest(), len(parts))


def _upload(s3, bucket, key, parts, order=None, workers=1):
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    order = order or list(range(1, len(parts) + 1))

    def put(n):
        return n, s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n, Body=parts[n - 1])["ETag"]

    with ThreadPoolExecutor(workers) as ex:
        etags = dict(ex.map(put, order))
    return uid, etags


def _complete(s3, bucket, key, uid, etags):
    done = [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": done})


def test_uniform_parts_land_in_one_data_file(s3, bucket, samba):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(123)]
    uid, etags = _upload(s3, bucket, "u", parts, order=[3, 1, 2], workers=3)
    updir = samba.share_path / ".smbgate" / "uploads" / uid
    assert (updir / "data").exists()
    assert sorted(p.name for p in updir.iterdir() if p.name.startswith("part-")) == ["part-00001", "part-00002", "part-00003"]
    # Full-size parts are records of bytes in the data file; the small last
    # part may have come first (before the stride was known) and be a file.
    assert all((updir / f"part-0000{n}").stat().st_size == 0 for n in (1, 2))
    r = _complete(s3, bucket, "u", uid, etags)
    assert r["ETag"] == _etag(parts)
    got = s3.get_object(Bucket=bucket, Key="u")
    assert got["Body"].read() == b"".join(parts)
    assert got["ETag"] == _etag(parts)
    assert not updir.exists()


def test_non_uniform_parts_are_concatenated(s3, bucket):
    # Part 1 fixes the stride at 5 MiB; part 2 is larger and lives in a file
    # of its own, so Complete must copy.
    parts = [os.urandom(5 * MIB), os.urandom(6 * MIB), os.urandom(1000)]
    uid, etags = _upload(s3, bucket, "n", parts)
    assert _complete(s3, bucket, "n", uid, etags)["ETag"] == _etag(parts)
    assert s3.get_object(Bucket=bucket, Key="n")["Body"].read() == b"".join(parts)


def test_completing_a_subset_with_a_gap(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(5 * MIB)]
    uid, etags = _upload(s3, bucket, "g", parts)
    del etags[2]
    chosen = [parts[0], parts[2]]
    assert _complete(s3, bucket, "g", uid, etags)["ETag"] == _etag(chosen)
    assert s3.get_object(Bucket=bucket, Key="g")["Body"].read() == b"".join(chosen)


def test_reuploaded_part_replaces_the_old_bytes(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(2000)]
    uid, etags = _upload(s3, bucket, "r", parts)
    new2 = os.urandom(1500)
    etags[2] = s3.upload_part(Bucket=bucket, Key="r", UploadId=uid, PartNumber=2, Body=new2)["ETag"]
    listed = s3.list_parts(Bucket=bucket, Key="r", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [(1, 5 * MIB), (2, 1500)]
    assert _complete(s3, bucket, "r", uid, etags)["ETag"] == _etag([parts[0], new2])
    assert s3.get_object(Bucket=bucket, Key="r")["Body"].read() == parts[0] + new2
