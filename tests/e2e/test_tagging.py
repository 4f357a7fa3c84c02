"""Object and bucket tagging (issue 22, point 2): PutObjectTagging,
GetObjectTagging, DeleteObjectTagging, x-amz-tagging on PutObject,
CreateMultipartUpload and CopyObject (with x-amz-tagging-directive),
x-amz-tagging-count on GET and HEAD, and the bucket forms. AWS's limits:
10 tags per object (50 per bucket), keys up to 128 and values up to 256
UTF-16 units, unique keys, no `aws:` prefix; anything else is 400
InvalidTag with nothing changed. Tags live in the object's record, so
they go with overwrites, copies and deletes, and tagging changes neither
the ETag nor Last-Modified."""

import hashlib
import os
import time

from conftest import put_on_share
from s3util import error


def tagset(**tags):
    return [{"Key": k, "Value": v} for k, v in tags.items()]



def test_object_tags_round_trip_and_leave_etag_and_time_alone(s3, bucket):
    body = b"tagged body"
    put = s3.put_object(Bucket=bucket, Key="a/obj.txt", Body=body, Metadata={"owner": "ops"},
                        ContentType="text/plain")
    before = s3.head_object(Bucket=bucket, Key="a/obj.txt")
    assert "x-amz-tagging-count" not in before["ResponseMetadata"]["HTTPHeaders"]
    time.sleep(1.1)  # a changed LastWriteTime would show in Last-Modified
    tags = [{"Key": "team", "Value": "data lake"}, {"Key": "stage", "Value": "raw"}, {"Key": "empty", "Value": ""}]
    r = s3.put_object_tagging(Bucket=bucket, Key="a/obj.txt", Tagging={"TagSet": tags})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    # Sorted by key, as AWS answers (issue 41, item 2).
    assert s3.get_object_tagging(Bucket=bucket, Key="a/obj.txt")["TagSet"] == sorted(tags, key=lambda t: t["Key"])
    after = s3.head_object(Bucket=bucket, Key="a/obj.txt")
    assert after["ETag"] == put["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    assert after["LastModified"] == before["LastModified"]
    assert (after["Metadata"], after["ContentType"]) == ({"owner": "ops"}, "text/plain")
    assert after["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "3"
    got = s3.get_object(Bucket=bucket, Key="a/obj.txt")
    assert (got["Body"].read(), got["TagCount"], got["ETag"]) == (body, 3, put["ETag"])
    # Replaced whole, not merged.
    s3.put_object_tagging(Bucket=bucket, Key="a/obj.txt", Tagging={"TagSet": tagset(only="one")})
    assert s3.get_object_tagging(Bucket=bucket, Key="a/obj.txt")["TagSet"] == tagset(only="one")
    d = s3.delete_object_tagging(Bucket=bucket, Key="a/obj.txt")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_object_tagging(Bucket=bucket, Key="a/obj.txt")["TagSet"] == []
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="a/obj.txt")
    assert s3.head_object(Bucket=bucket, Key="a/obj.txt")["ETag"] == put["ETag"]


def test_tags_on_put_go_with_overwrite_and_delete(s3, bucket):
    # A tag without `=` has an empty value; the answer is sorted by key.
    s3.put_object(Bucket=bucket, Key="k", Body=b"v1", Tagging="b=x%20y&c&a=1&foo=bar&bar")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == [
        {"Key": "a", "Value": "1"}, {"Key": "b", "Value": "x y"}, {"Key": "bar", "Value": ""},
        {"Key": "c", "Value": ""}, {"Key": "foo", "Value": "bar"}]
    # An overwrite without tags clears them, as on AWS.
    s3.put_object(Bucket=bucket, Key="k", Body=b"v2")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []
    s3.put_object(Bucket=bucket, Key="k", Body=b"v3", Tagging="x=y")
    s3.delete_object(Bucket=bucket, Key="k")
    s3.put_object(Bucket=bucket, Key="k", Body=b"v4")
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == []


def test_bad_tag_sets_are_400_invalid_tag_and_change_nothing(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v", Tagging="keep=me")
    bad = [
        [{"Key": f"k{i}", "Value": "v"} for i in range(11)],
        [{"Key": "dup", "Value": "1"}, {"Key": "dup", "Value": "2"}],
        [{"Key": "k" * 129, "Value": "v"}],
        [{"Key": "k", "Value": "v" * 257}],
        [{"Key": "aws:owner", "Value": "v"}],
        [{"Key": "a<b", "Value": "v"}],
    ]
    for tags in bad:
        assert error(lambda: s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tags})) == (
            "InvalidTag", 400), tags
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == tagset(keep="me")
    # The limits count UTF-16 units, as AWS does.
    ok = [{"Key": "é" * 128, "Value": "ü" * 256}]
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": ok})
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == ok
    # On PutObject the body is not stored.
    eleven = "&".join(f"k{i}=v" for i in range(11))
    assert error(lambda: s3.put_object(Bucket=bucket, Key="new", Body=b"x", Tagging=eleven)) == ("InvalidTag", 400)
    assert error(lambda: s3.head_object(Bucket=bucket, Key="new")) == ("404", 404)
    assert error(lambda: s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging=eleven)) == (
        "InvalidTag", 400)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_tagging_a_missing_key_or_bucket_is_404(s3, bucket):
    t = {"TagSet": tagset(a="b")}
    assert error(lambda: s3.get_object_tagging(Bucket=bucket, Key="nope")) == ("NoSuchKey", 404)
    assert error(lambda: s3.put_object_tagging(Bucket=bucket, Key="nope", Tagging=t)) == ("NoSuchKey", 404)
    assert error(lambda: s3.delete_object_tagging(Bucket=bucket, Key="nope")) == ("NoSuchKey", 404)
    assert error(lambda: s3.put_object_tagging(Bucket="no-such-bucket-x", Key="k", Tagging=t)) == (
        "NoSuchBucket", 404)
    assert error(lambda: s3.get_bucket_tagging(Bucket="no-such-bucket-x")) == ("NoSuchBucket", 404)


def test_copy_takes_or_replaces_tags_by_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source", Tagging="from=source")
    src = {"Bucket": bucket, "Key": "src"}
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=src)
    assert s3.get_object_tagging(Bucket=bucket, Key="copied")["TagSet"] == tagset(**{"from": "source"})
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource=src, TaggingDirective="REPLACE", Tagging="new=tag")
    assert s3.get_object_tagging(Bucket=bucket, Key="replaced")["TagSet"] == tagset(new="tag")
    s3.copy_object(Bucket=bucket, Key="cleared", CopySource=src, TaggingDirective="REPLACE")
    assert s3.get_object_tagging(Bucket=bucket, Key="cleared")["TagSet"] == []
    # New metadata, tags still the source's.
    s3.copy_object(Bucket=bucket, Key="meta", CopySource=src, MetadataDirective="REPLACE", Metadata={"m": "1"})
    assert s3.get_object_tagging(Bucket=bucket, Key="meta")["TagSet"] == tagset(**{"from": "source"})
    assert s3.head_object(Bucket=bucket, Key="meta")["Metadata"] == {"m": "1"}


def test_multipart_upload_tags_land_on_the_object(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="big", Tagging="project=apollo&tier=cold")
    part = s3.upload_part(Bucket=bucket, Key="big", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 1000)
    s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="big")["TagSet"] == tagset(project="apollo", tier="cold")
    assert s3.get_object(Bucket=bucket, Key="big")["TagCount"] == 2


def test_a_file_put_on_the_share_keeps_its_etag_when_tagged(s3, bucket, samba, tmp_path):
    path = put_on_share(samba, bucket, "explorer.bin", os.urandom(3000))
    before = s3.head_object(Bucket=bucket, Key="explorer.bin")
    assert before["ETag"].endswith('-1"')
    s3.put_object_tagging(Bucket=bucket, Key="explorer.bin", Tagging={"TagSet": tagset(found="on share")})
    after = s3.head_object(Bucket=bucket, Key="explorer.bin")
    assert (after["ETag"], after["LastModified"]) == (before["ETag"], before["LastModified"])
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["ETag"]) for o in listed] == [("explorer.bin", before["ETag"])]
    assert s3.get_object_tagging(Bucket=bucket, Key="explorer.bin")["TagSet"] == tagset(found="on share")
    # Someone rewrites it on the share (over SMB, which breaks the object
    # cache's lease; a change made on the server's own disk is seen within
    # --cache-max-age, see test_object_cache.py): a new object, with a new
    # ETag and without the old one's tags.
    (tmp_path / "new").write_bytes(os.urandom(5000))
    samba.smbclient(f'put {tmp_path / "new"} {bucket}/explorer.bin')
    assert path.stat().st_size == 5000
    assert s3.head_object(Bucket=bucket, Key="explorer.bin")["ETag"] not in (before["ETag"],)
    assert s3.get_object_tagging(Bucket=bucket, Key="explorer.bin")["TagSet"] == []


def test_bucket_tags(s3, bucket):
    assert error(lambda: s3.get_bucket_tagging(Bucket=bucket)) == ("NoSuchTagSet", 404)
    tags = tagset(cost="team-a", env="prod")
    r = s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == tags
    fifty = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": fifty})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == fifty
    fifty_one = fifty + [{"Key": "k50", "Value": "v"}]
    assert error(lambda: s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": fifty_one})) == ("InvalidTag", 400)
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == fifty
    assert s3.delete_bucket_tagging(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert error(lambda: s3.get_bucket_tagging(Bucket=bucket)) == ("NoSuchTagSet", 404)


def test_a_bucket_made_again_has_no_old_tags(s3):
    s3.create_bucket(Bucket="tagged-twice")
    s3.put_bucket_tagging(Bucket="tagged-twice", Tagging={"TagSet": tagset(old="yes")})
    s3.delete_bucket(Bucket="tagged-twice")
    s3.create_bucket(Bucket="tagged-twice")
    assert error(lambda: s3.get_bucket_tagging(Bucket="tagged-twice")) == ("NoSuchTagSet", 404)
    s3.delete_bucket(Bucket="tagged-twice")
