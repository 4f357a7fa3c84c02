"""Bucket operations through boto3, with the exact codes S3 answers."""

import uuid

import pytest

import boto3
from botocore.config import Config

from conftest import ACCESS_KEY, SECRET_KEY, Gateway
from s3util import expect_error, raw, status


def new_name():
    return f"b-{uuid.uuid4().hex[:12]}"


def test_list_buckets_includes_ours_not_internal(s3, bucket, samba):
    # Make sure the internal dir exists on the share (a PUT creates .smbgate/tmp).
    s3.put_object(Bucket=bucket, Key="x", Body=b"x")
    assert (samba.share_path / ".smbgate").is_dir()
    r = s3.list_buckets()
    assert status(r) == 200
    names = [b["Name"] for b in r["Buckets"]]
    assert bucket in names
    assert ".smbgate" not in names
    assert not any(n.startswith(".") for n in names)
    assert names == sorted(names)
    assert "CreationDate" in [b for b in r["Buckets"] if b["Name"] == bucket][0]
    assert r["Owner"]["ID"]


def test_create_bucket_twice(s3):
    # AWS: in us-east-1 (the gateway's default region) creating a bucket
    # you already own is 200 and leaves it as it was (issue 11, item 16).
    name = new_name()
    r = s3.create_bucket(Bucket=name)
    assert status(r) == 200
    assert r["Location"] == f"/{name}"
    s3.put_object(Bucket=name, Key="kept", Body=b"still here")
    again = s3.create_bucket(Bucket=name)
    assert status(again) == 200 and again["Location"] == f"/{name}"
    assert s3.get_object(Bucket=name, Key="kept")["Body"].read() == b"still here"
    s3.delete_object(Bucket=name, Key="kept")
    s3.delete_bucket(Bucket=name)


def test_create_bucket_twice_in_another_region_is_409(samba):
    g = Gateway(samba, "--region", "eu-west-1")
    try:
        s3 = boto3.client("s3", endpoint_url=g.endpoint, region_name="eu-west-1", aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY,
                          config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        name = new_name()
        cfg = {"LocationConstraint": "eu-west-1"}
        s3.create_bucket(Bucket=name, CreateBucketConfiguration=cfg)
        expect_error(409, "BucketAlreadyOwnedByYou", s3.create_bucket, Bucket=name, CreateBucketConfiguration=cfg)
        s3.delete_bucket(Bucket=name)
    finally:
        g.stop()


def test_create_bucket_on_disk(s3, samba):
    name = new_name()
    s3.create_bucket(Bucket=name)
    assert (samba.share_path / name).is_dir()
    s3.delete_bucket(Bucket=name)
    assert not (samba.share_path / name).exists()


@pytest.mark.parametrize("name", ["ab", "A-upper", "bad_underscore", "-lead", "a" * 64, "192.168.1.1"])
def test_create_bucket_invalid_name(s3, samba, name):
    expect_error(400, "InvalidBucketName", s3.create_bucket, Bucket=name)
    assert not (samba.share_path / name).exists()


def test_head_bucket(s3, bucket):
    r = s3.head_bucket(Bucket=bucket)
    assert status(r) == 200


def test_head_bucket_missing(s3):
    # HEAD has no body: boto3 reports the status code as the error code.
    expect_error(404, "404", s3.head_bucket, Bucket=new_name())


def test_get_on_missing_bucket(s3):
    name = new_name()
    expect_error(404, "NoSuchBucket", s3.list_objects_v2, Bucket=name)
    expect_error(404, "NoSuchBucket", s3.put_object, Bucket=name, Key="k", Body=b"x")
    expect_error(404, "NoSuchBucket", s3.get_object, Bucket=name, Key="k")
    expect_error(404, "NoSuchBucket", s3.delete_bucket, Bucket=name)


def test_delete_bucket_not_empty(s3, bucket, samba):
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    expect_error(409, "BucketNotEmpty", s3.delete_bucket, Bucket=bucket)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"data"


def test_delete_bucket_not_empty_nested(s3, bucket):
    s3.put_object(Bucket=bucket, Key="a/b/c", Body=b"data")
    expect_error(409, "BucketNotEmpty", s3.delete_bucket, Bucket=bucket)
    assert s3.get_object(Bucket=bucket, Key="a/b/c")["Body"].read() == b"data"


def test_delete_bucket_empty(s3, samba):
    name = new_name()
    s3.create_bucket(Bucket=name)
    r = s3.delete_bucket(Bucket=name)
    assert status(r) == 204
    expect_error(404, "404", s3.head_bucket, Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_delete_bucket_after_objects_deleted(s3):
    name = new_name()
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="d/e/f", Body=b"1")
    s3.delete_object(Bucket=name, Key="d/e/f")
    # Empty directories left behind by deleted keys must not keep the bucket "non-empty".
    assert status(s3.delete_bucket(Bucket=name)) == 204


def test_get_bucket_location(s3, bucket):
    r = s3.get_bucket_location(Bucket=bucket)
    assert status(r) == 200
    # us-east-1 is reported as an empty (null) LocationConstraint.
    assert r.get("LocationConstraint") is None


def test_get_bucket_location_missing(s3):
    expect_error(404, "NoSuchBucket", s3.get_bucket_location, Bucket=new_name())


def test_get_bucket_versioning(s3, bucket):
    r = s3.get_bucket_versioning(Bucket=bucket)
    assert status(r) == 200
    assert "Status" not in r
    assert "MFADelete" not in r


def test_get_bucket_acl(s3, bucket):
    r = s3.get_bucket_acl(Bucket=bucket)
    assert status(r) == 200
    owner = r["Owner"]["ID"]
    assert owner
    assert len(r["Grants"]) == 1
    g = r["Grants"][0]
    assert g["Permission"] == "FULL_CONTROL"
    assert g["Grantee"]["Type"] == "CanonicalUser"
    assert g["Grantee"]["ID"] == owner


def test_list_buckets_owner_matches_acl(s3, bucket):
    assert s3.list_buckets()["Owner"]["ID"] == s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]


def test_put_bucket_acl_canned_accepted(s3, bucket):
    assert status(s3.put_bucket_acl(Bucket=bucket, ACL="private")) == 200


@pytest.mark.parametrize("op,kwargs", [
    ("get_bucket_replication", {}),
    ("put_bucket_policy", {"Policy": '{"Version":"2012-10-17","Statement":[]}'}),
    ("get_bucket_policy", {}),
    ("get_bucket_lifecycle_configuration", {}),
    ("get_bucket_encryption", {}),
    ("get_bucket_website", {}),
])
def test_unsupported_bucket_ops_not_implemented(s3, bucket, op, kwargs):
    expect_error(501, "NotImplemented", getattr(s3, op), Bucket=bucket, **kwargs)


def test_object_lock_calls_on_a_bucket_without_object_lock(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    expect_error(400, "InvalidRequest", s3.get_object_legal_hold, Bucket=bucket, Key="k")
    expect_error(400, "InvalidRequest", s3.get_object_retention, Bucket=bucket, Key="k")
    expect_error(404, "ObjectLockConfigurationNotFoundError", s3.get_object_lock_configuration, Bucket=bucket)


def test_root_unsigned_get_is_403(gateway):
    st, headers, body = raw(gateway.endpoint, "GET", "/")
    assert st == 403, (st, body)
    assert b"<Code>AccessDenied</Code>" in body


def test_root_head_is_a_health_probe(gateway):
    # Load balancers probe HEAD / (failure class 22): 200 while SMB is reachable.
    st, headers, body = raw(gateway.endpoint, "HEAD", "/")
    assert st == 200, (st, body)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_bucket_unsigned_is_403(gateway, bucket, method):
    st, headers, body = raw(gateway.endpoint, method, f"/{bucket}")
    assert st == 403, (st, body)
    if method == "GET":
        assert b"<Code>AccessDenied</Code>" in body
