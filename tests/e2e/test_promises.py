"""Issue 43, item 0: a request that asks for a guarantee the gateway does
not give (Object Lock, SSE-C, SSE-KMS, SSE-S3 on a share not declared
encrypted, website redirects) is refused as AWS refuses it where the
feature is missing, and nothing is stored. Accepting and ignoring it would
tell a backup tool its backup is immutable, or a client that its data is
encrypted, while the share holds plain, deletable files."""

import base64
import datetime
import hashlib
import uuid

import pytest

from conftest import Gateway
from s3util import expect_error, md5_etag

RETAIN = datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc)
SSE_C = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}


def absent(s3, bucket, key):
    expect_error(404, "404", s3.head_object, Bucket=bucket, Key=key)


def test_create_bucket_with_object_lock_makes_a_locked_versioned_bucket(s3):
    name = f"lock-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    assert s3.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
    assert s3.get_object_lock_configuration(Bucket=name)["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"
    s3.delete_bucket(Bucket=name)
    # Explicitly off is an ordinary bucket.
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=False)
    s3.head_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)


@pytest.mark.parametrize("lock", [
    {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": RETAIN},
    {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": RETAIN},
    {"ObjectLockLegalHoldStatus": "ON"},
], ids=["compliance", "governance", "legal-hold"])
def test_lock_headers_on_a_bucket_without_object_lock_are_refused_and_store_nothing(s3, bucket, lock):
    body = b"backup"
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    r = expect_error(400, "InvalidRequest", s3.put_object, Bucket=bucket, Key="locked", Body=body,
                     ContentMD5=md5, **lock)
    assert r["Error"]["Message"] == "Bucket is missing Object Lock Configuration"
    absent(s3, bucket, "locked")
    expect_error(400, "InvalidRequest", s3.create_multipart_upload, Bucket=bucket, Key="locked", **lock)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    s3.put_object(Bucket=bucket, Key="src", Body=body)
    expect_error(400, "InvalidRequest", s3.copy_object, Bucket=bucket, Key="locked",
                 CopySource={"Bucket": bucket, "Key": "src"}, **lock)
    absent(s3, bucket, "locked")


def test_sse_c_is_refused_over_plain_http_and_where_it_is_not_built(s3, bucket):
    # SSE-C itself is tests/e2e/test_sse_c.py (over TLS). Over plain HTTP
    # a key is refused, as AWS refuses it, and nothing is stored.
    r = expect_error(400, "InvalidRequest", s3.put_object, Bucket=bucket, Key="secret", Body=b"plain", **SSE_C)
    assert "must be made over a secure connection" in r["Error"]["Message"]
    absent(s3, bucket, "secret")
    expect_error(400, "InvalidRequest", s3.create_multipart_upload, Bucket=bucket, Key="secret", **SSE_C)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain")
    expect_error(400, "InvalidRequest", s3.get_object, Bucket=bucket, Key="plain", **SSE_C)
    expect_error(400, "400", s3.head_object, Bucket=bucket, Key="plain", **SSE_C)  # HEAD has no body
    expect_error(400, "InvalidRequest", s3.copy_object, Bucket=bucket, Key="copy",
                 CopySource={"Bucket": bucket, "Key": "plain"},
                 CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey="k" * 32)
    absent(s3, bucket, "copy")
    up = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    expect_error(400, "InvalidRequest", s3.upload_part, Bucket=bucket, Key="parts", UploadId=up, PartNumber=1,
                 Body=b"x", **SSE_C)
    assert s3.list_parts(Bucket=bucket, Key="parts", UploadId=up).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="parts", UploadId=up)


@pytest.mark.parametrize("sse", [
    {"ServerSideEncryption": "aws:kms"},
    {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "arn:aws:kms:us-east-1:1:key/k"},
    {"ServerSideEncryption": "aws:kms:dsse"},
    {"ServerSideEncryption": "AES256"},
    {"WebsiteRedirectLocation": "/elsewhere"},
], ids=["kms", "kms-key", "dsse", "sse-s3", "website-redirect"])
def test_encryption_and_redirects_not_given_are_refused(s3, bucket, sse):
    expect_error(501, "NotImplemented", s3.put_object, Bucket=bucket, Key="k", Body=b"x", **sse)
    absent(s3, bucket, "k")


def test_an_unknown_encryption_method_is_an_invalid_argument(s3, bucket):
    def add_header(request, **_):
        request.headers["x-amz-server-side-encryption"] = "rot13"
    s3.meta.events.register("before-sign.s3.PutObject", add_header)
    try:
        expect_error(400, "InvalidArgument", s3.put_object, Bucket=bucket, Key="k", Body=b"x")
    finally:
        s3.meta.events.unregister("before-sign.s3.PutObject", add_header)
    absent(s3, bucket, "k")


def test_what_aws_treats_as_a_no_op_is_still_accepted(s3, bucket):
    r = s3.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="private", StorageClass="STANDARD",
                      ExpectedBucketOwner="123456789012", RequestPayer="requester")
    assert r["ETag"] == md5_etag(b"x")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"


@pytest.mark.parametrize("field", [("x-amz-server-side-encryption-customer-algorithm", "AES256"),
                                   ("x-amz-object-lock-legal-hold", "ON")], ids=["sse-c", "legal-hold"])
def test_a_form_asking_for_a_guarantee_is_refused(gateway, s3, bucket, field):
    from test_post_object import code, post
    name, value = field
    p = gateway.client(signature_version="s3v4").generate_presigned_post(
        bucket, "form-k", Fields={name: value}, Conditions=[{name: value}], ExpiresIn=300)
    r = post(gateway, bucket, p["fields"])
    assert code(r) == ((501, "NotImplemented") if "customer" in name else (400, "InvalidRequest")), r.text
    absent(s3, bucket, "form-k")


def test_sse_s3_is_accepted_where_the_operator_declares_the_share_encrypted(samba):
    g = Gateway(samba, env={"SMBGATE_ENCRYPTED_AT_REST": "on"})
    try:
        s3 = g.client()
        s3.create_bucket(Bucket="at-rest")
        s3.put_object(Bucket="at-rest", Key="k", Body=b"x", ServerSideEncryption="AES256")
        assert s3.get_object(Bucket="at-rest", Key="k")["Body"].read() == b"x"
        # Still no KMS, and customer keys only over TLS.
        expect_error(501, "NotImplemented", s3.put_object, Bucket="at-rest", Key="k2", Body=b"x",
                     ServerSideEncryption="aws:kms")
        expect_error(400, "InvalidRequest", s3.put_object, Bucket="at-rest", Key="k2", Body=b"x", **SSE_C)
        s3.delete_object(Bucket="at-rest", Key="k")
        s3.delete_bucket(Bucket="at-rest")
    finally:
        g.stop()
