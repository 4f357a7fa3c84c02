"""GetObjectAttributes (issue 22, point 3): ETag (unquoted, as AWS writes
it here), Checksum with its type, ObjectParts (the parts count of a
multipart object), StorageClass and ObjectSize, as many as
x-amz-object-attributes names; the conditional headers and the errors of
HEAD."""

import base64
import hashlib
import zlib

from s3util import error

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]



def attributes(r):
    return {k: v for k, v in r.items() if k not in ("ResponseMetadata", "LastModified")}


def test_every_attribute_of_a_single_put(s3, bucket):
    body = b"attributes of a plain object"
    s3.put_object(Bucket=bucket, Key="k", Body=body, ChecksumAlgorithm="SHA256")
    r = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=ALL)
    assert attributes(r) == {
        "ETag": hashlib.md5(body).hexdigest(),
        "Checksum": {"ChecksumSHA256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
                     "ChecksumType": "FULL_OBJECT"},
        "StorageClass": "STANDARD",
        "ObjectSize": len(body),
    }
    assert r["LastModified"] == s3.head_object(Bucket=bucket, Key="k")["LastModified"]


def test_only_the_attributes_asked_for(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"12345")
    assert attributes(s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])) == {
        "ObjectSize": 5}
    # boto3 sends a CRC32 of every PUT body unless told otherwise.
    crc32 = base64.b64encode(zlib.crc32(b"12345").to_bytes(4, "big")).decode()
    assert attributes(s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ETag", "Checksum"])) == {
        "ETag": hashlib.md5(b"12345").hexdigest(),
        "Checksum": {"ChecksumCRC32": crc32, "ChecksumType": "FULL_OBJECT"}}
    assert error(lambda: s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["Colour"])) == (
        "InvalidArgument", 400)


def test_a_multipart_object_counts_its_parts(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")
    parts = []
    for n in (1, 2, 3):
        body = bytes([n]) * (5 << 20 if n < 3 else 1000)
        p = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=n, Body=body)
        parts.append({"PartNumber": n, "ETag": p["ETag"]})
    done = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": parts})
    r = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    assert attributes(r) == {
        "ETag": done["ETag"].strip('"'),
        "ObjectParts": {"TotalPartsCount": 3},
        "StorageClass": "STANDARD",
        "ObjectSize": 2 * (5 << 20) + 1000,
    }


def test_conditions_and_errors_are_heads(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    etag = s3.head_object(Bucket=bucket, Key="k")["ETag"]
    extra = {}
    def add_headers(request, **_):
        for k, v in extra.items():
            request.headers[k] = v

    s3.meta.events.register("before-sign.s3.GetObjectAttributes", add_headers)
    extra.update({"If-Match": '"0000"'})
    assert error(lambda: s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ETag"])) == (
        "PreconditionFailed", 412)
    extra.clear()
    extra.update({"If-None-Match": etag})
    assert error(lambda: s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ETag"])) == (
        "304", 304)
    extra.clear()
    extra.update({"If-Match": etag})
    assert s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ETag"])["ETag"] == etag.strip('"')
    extra.clear()
    assert error(lambda: s3.get_object_attributes(Bucket=bucket, Key="nope", ObjectAttributes=["ETag"])) == (
        "NoSuchKey", 404)
    assert error(lambda: s3.get_object_attributes(Bucket="no-such-bucket-y", Key="k", ObjectAttributes=["ETag"])) == (
        "NoSuchBucket", 404)
