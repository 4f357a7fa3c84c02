"""Multipart checksums end to end (issue 22, point 4): an upload created
with x-amz-checksum-algorithm (and x-amz-checksum-type) echoes both; each
part's checksum is verified and kept (ListParts shows it); Complete checks
the part checksums the client lists (a wrong one is 400 BadDigest and
publishes nothing) and answers the object's checksum, COMPOSITE
(`<base64>-N`) or FULL_OBJECT (the CRC of the whole object), which HEAD,
GET and GetObjectAttributes then give too."""

import base64
import hashlib
import zlib

from s3util import error

MIB = 1 << 20


def b64(raw):
    return base64.b64encode(raw).decode()


def crc32(data):
    return b64(zlib.crc32(data).to_bytes(4, "big"))



def upload(s3, bucket, key, bodies, **create):
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, **create)
    alg = create.get("ChecksumAlgorithm")
    parts = []
    for n, body in enumerate(bodies, 1):
        extra = {"ChecksumAlgorithm": alg} if alg else {}
        p = s3.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=n, Body=body, **extra)
        part = {"PartNumber": n, "ETag": p["ETag"]}
        if alg:
            part[f"Checksum{alg}"] = p[f"Checksum{alg}"]
        parts.append(part)
    return up, parts


def test_composite_sha256(s3, bucket):
    bodies = [b"a" * (5 * MIB), b"b" * 1000]
    up, parts = upload(s3, bucket, "comp", bodies, ChecksumAlgorithm="SHA256")
    assert (up["ChecksumAlgorithm"], up["ChecksumType"]) == ("SHA256", "COMPOSITE")
    digests = [hashlib.sha256(b).digest() for b in bodies]
    assert [p["ChecksumSHA256"] for p in parts] == [b64(d) for d in digests]
    listed = s3.list_parts(Bucket=bucket, Key="comp", UploadId=up["UploadId"])
    assert (listed["ChecksumAlgorithm"], listed["ChecksumType"]) == ("SHA256", "COMPOSITE")
    assert [p["ChecksumSHA256"] for p in listed["Parts"]] == [b64(d) for d in digests]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="comp", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": parts})
    want = b64(hashlib.sha256(b"".join(digests)).digest()) + "-2"
    assert (done["ChecksumSHA256"], done["ChecksumType"]) == (want, "COMPOSITE")
    head = s3.head_object(Bucket=bucket, Key="comp", ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], head["ChecksumType"]) == (want, "COMPOSITE")
    got = s3.get_object(Bucket=bucket, Key="comp", ChecksumMode="ENABLED")
    assert got["Body"].read() == b"".join(bodies) and got["ChecksumSHA256"] == want
    attrs = s3.get_object_attributes(Bucket=bucket, Key="comp", ObjectAttributes=["Checksum", "ObjectParts"])
    assert attrs["Checksum"] == {"ChecksumSHA256": want, "ChecksumType": "COMPOSITE"}
    assert attrs["ObjectParts"]["TotalPartsCount"] == 2
    assert [(p["PartNumber"], p["Size"], p["ChecksumSHA256"]) for p in attrs["ObjectParts"]["Parts"]] == [
        (1, 5 * MIB, b64(digests[0])), (2, 1000, b64(digests[1]))]
    page = s3.get_object_attributes(Bucket=bucket, Key="comp", ObjectAttributes=["ObjectParts"], MaxParts=1)
    assert page["ObjectParts"]["IsTruncated"] and page["ObjectParts"]["NextPartNumberMarker"] == 1
    assert [p["PartNumber"] for p in page["ObjectParts"]["Parts"]] == [1]
    rest = s3.get_object_attributes(Bucket=bucket, Key="comp", ObjectAttributes=["ObjectParts"], MaxParts=1,
                                    PartNumberMarker=1)
    assert [p["PartNumber"] for p in rest["ObjectParts"]["Parts"]] == [2]
    assert not rest["ObjectParts"]["IsTruncated"]
    # Issue 41, item 1: a part GET (or HEAD) answers the part's checksum
    # and the type; a range, none.
    for n in (1, 2):
        part = s3.get_object(Bucket=bucket, Key="comp", PartNumber=n, ChecksumMode="ENABLED")
        assert part["Body"].read() == bodies[n - 1]
        assert (part["ChecksumSHA256"], part["ChecksumType"]) == (b64(digests[n - 1]), "COMPOSITE")
        head = s3.head_object(Bucket=bucket, Key="comp", PartNumber=n, ChecksumMode="ENABLED")
        assert (head["ChecksumSHA256"], head["PartsCount"]) == (b64(digests[n - 1]), 2)
    ranged = s3.get_object(Bucket=bucket, Key="comp", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in ranged and "ChecksumType" not in ranged
    # A retried Complete (the upload is gone) answers the same ETag and
    # checksum, as AWS does.
    again = s3.complete_multipart_upload(Bucket=bucket, Key="comp", UploadId=up["UploadId"],
                                         MultipartUpload={"Parts": parts})
    assert (again["ETag"], again["ChecksumSHA256"], again["ChecksumType"]) == (done["ETag"], want, "COMPOSITE")


def test_full_object_crc32_is_the_crc_of_the_whole(s3, bucket):
    bodies = [bytes(range(256)) * (5 * MIB // 256), b"tail" * 333]
    up, parts = upload(s3, bucket, "full", bodies, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT")
    assert (up["ChecksumAlgorithm"], up["ChecksumType"]) == ("CRC32", "FULL_OBJECT")
    whole = b"".join(bodies)
    done = s3.complete_multipart_upload(Bucket=bucket, Key="full", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": parts}, ChecksumCRC32=crc32(whole))
    assert (done["ChecksumCRC32"], done["ChecksumType"]) == (crc32(whole), "FULL_OBJECT")
    # boto3 checks the body it reads against a full-object checksum.
    got = s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")
    assert got["Body"].read() == whole
    assert (got["ChecksumCRC32"], got["ChecksumType"]) == (crc32(whole), "FULL_OBJECT")


def test_a_wrong_part_checksum_publishes_nothing(s3, bucket):
    up, parts = upload(s3, bucket, "bad", [b"x" * (5 * MIB), b"y"], ChecksumAlgorithm="CRC32")
    wrong = [dict(parts[0]), dict(parts[1], ChecksumCRC32=crc32(b"not y"))]
    # 400 BadDigest, as AWS answers (issue 41, item 1; it was InvalidPart).
    assert error(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="bad", UploadId=up["UploadId"],
                                                      MultipartUpload={"Parts": wrong})) == ("BadDigest", 400)
    # COMPOSITE: every part must be listed with its checksum.
    bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]
    assert error(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="bad", UploadId=up["UploadId"],
                                                      MultipartUpload={"Parts": bare})) == ("InvalidRequest", 400)
    assert error(lambda: s3.head_object(Bucket=bucket, Key="bad")) == ("404", 404)
    # A part uploaded again replaces its checksum; the right list completes.
    again = s3.upload_part(Bucket=bucket, Key="bad", UploadId=up["UploadId"], PartNumber=2, Body=b"z",
                           ChecksumAlgorithm="CRC32")
    assert again["ChecksumCRC32"] == crc32(b"z")
    parts[1] = {"PartNumber": 2, "ETag": again["ETag"], "ChecksumCRC32": again["ChecksumCRC32"]}
    s3.complete_multipart_upload(Bucket=bucket, Key="bad", UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="bad")["Body"].read() == b"x" * (5 * MIB) + b"z"


def test_a_wrong_object_checksum_is_bad_digest(s3, bucket):
    up, parts = upload(s3, bucket, "whole", [b"p" * (5 * MIB), b"q"], ChecksumAlgorithm="CRC32",
                       ChecksumType="FULL_OBJECT")
    assert error(lambda: s3.complete_multipart_upload(
        Bucket=bucket, Key="whole", UploadId=up["UploadId"], MultipartUpload={"Parts": parts},
        ChecksumCRC32="AAAAAA==")) == ("BadDigest", 400)
    assert error(lambda: s3.head_object(Bucket=bucket, Key="whole")) == ("404", 404)


def test_pairs_aws_refuses(s3, bucket):
    for alg, kind in [("SHA256", "FULL_OBJECT"), ("SHA1", "FULL_OBJECT"), ("CRC64NVME", "COMPOSITE")]:
        assert error(lambda: s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm=alg,
                                                        ChecksumType=kind)) == ("InvalidRequest", 400), (alg, kind)
    up = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="CRC64NVME")
    assert up["ChecksumType"] == "FULL_OBJECT"
    s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=up["UploadId"])
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_a_copied_part_gets_the_uploads_checksum(s3, bucket):
    src = bytes(range(256)) * (6 * MIB // 256)
    s3.put_object(Bucket=bucket, Key="src", Body=src)
    up = s3.create_multipart_upload(Bucket=bucket, Key="joined", ChecksumAlgorithm="SHA256")
    copied = s3.upload_part_copy(Bucket=bucket, Key="joined", UploadId=up["UploadId"], PartNumber=1,
                                 CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=f"bytes=0-{5 * MIB - 1}")
    first = hashlib.sha256(src[:5 * MIB]).digest()
    assert copied["CopyPartResult"]["ChecksumSHA256"] == b64(first)
    last = s3.upload_part(Bucket=bucket, Key="joined", UploadId=up["UploadId"], PartNumber=2, Body=b"end",
                          ChecksumAlgorithm="SHA256")
    parts = [{"PartNumber": 1, "ETag": copied["CopyPartResult"]["ETag"], "ChecksumSHA256": b64(first)},
             {"PartNumber": 2, "ETag": last["ETag"], "ChecksumSHA256": last["ChecksumSHA256"]}]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="joined", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": parts})
    want = b64(hashlib.sha256(first + hashlib.sha256(b"end").digest()).digest()) + "-2"
    assert done["ChecksumSHA256"] == want
    assert s3.get_object(Bucket=bucket, Key="joined")["Body"].read() == src[:5 * MIB] + b"end"
    # A whole copy of the multipart object is one object again.
    s3.copy_object(Bucket=bucket, Key="flat", CopySource={"Bucket": bucket, "Key": "joined"})
    head = s3.head_object(Bucket=bucket, Key="flat", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in head and "ChecksumType" not in head
    attrs = s3.get_object_attributes(Bucket=bucket, Key="flat", ObjectAttributes=["ObjectParts", "ObjectSize"])
    assert attrs.get("ObjectParts") is None and attrs["ObjectSize"] == 5 * MIB + 3
