"""Signature parameters AWS checks and s3s leaves to us (issue 11, items 3,
4 and 5): the SigV4 scope names the region, presigned URLs live at most 7
days and die when they expire, SigV4 dated by `Date` alone is accepted,
header-signed SigV2 must be fresh, and `--sigv2 off` turns SigV2 away."""

import base64
import email.utils
import hashlib
import hmac
import time
import urllib.parse
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway
from s3util import raw


def client(gw, **kw):
    cfg = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}, **kw.pop("config", {}))
    return boto3.client("s3", endpoint_url=gw.endpoint, region_name=kw.pop("region", REGION),
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, config=cfg, **kw)


def fetch(gw, url):
    u = urllib.parse.urlparse(url)
    return raw(gw.endpoint, "GET", u.path + "?" + u.query)


@pytest.fixture(scope="module")
def obj(gateway):
    s3 = client(gateway)
    b = f"sig-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="k", Body=b"payload")
    return b


def test_a_scope_for_another_region_is_refused_naming_ours(gateway, obj):
    with pytest.raises(ClientError) as e:
        client(gateway, region="eu-west-1").get_object(Bucket=obj, Key="k")
    err = e.value.response["Error"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert err["Code"] == "AuthorizationHeaderMalformed"
    assert err["Message"] == ("The authorization header is malformed; the region 'eu-west-1' is wrong; "
                              "expecting 'us-east-1'")


def test_presigned_url_lifetimes(gateway, obj):
    s3 = client(gateway, config={"signature_version": "s3v4"})
    ok = s3.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "k"}, ExpiresIn=3600)
    assert fetch(gateway, ok)[::2] == (200, b"payload")
    week = s3.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "k"}, ExpiresIn=604800)
    assert fetch(gateway, week)[0] == 200
    eight_days = s3.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "k"}, ExpiresIn=8 * 86400)
    st, _, body = fetch(gateway, eight_days)
    assert st == 403 and b"<Code>AuthorizationQueryParametersError</Code>" in body, body
    assert b"X-Amz-Expires must be less than a week (in seconds) that is 604800" in body
    negative = ok.replace("X-Amz-Expires=3600", "X-Amz-Expires=-5")
    st, _, body = fetch(gateway, negative)
    assert st == 403 and b"<Code>AuthorizationQueryParametersError</Code>" in body, body
    short = s3.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "k"}, ExpiresIn=1)
    time.sleep(2.5)
    st, _, body = fetch(gateway, short)
    assert st == 403 and b"<Code>AccessDenied</Code><Message>Request has expired</Message>" in body, body


def test_a_presigned_url_with_an_authorization_header_is_refused(gateway, obj):
    """A presigned URL sent with an Authorization header as well is 400
    InvalidArgument, as on AWS: an expired URL cannot be revived by adding
    any header, nor a SigV2 URL slip past `--sigv2 off` (issue 23, point 6.1)."""
    s3 = client(gateway, config={"signature_version": "s3v4"})
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "k"}, ExpiresIn=1)
    time.sleep(2.5)
    u = urllib.parse.urlparse(expired)
    for auth in ["Bearer x", "AWS4-HMAC-SHA256 Credential=x"]:
        st, _, body = raw(gateway.endpoint, "GET", u.path + "?" + u.query, headers={"Authorization": auth})
        assert st == 400 and b"<Code>InvalidArgument</Code>" in body, (auth, st, body)
        assert b"Only one auth mechanism allowed" in body
    # Without the header the expired URL is what it is.
    assert fetch(gateway, expired)[0] == 403


def test_sigv4_dated_by_date_alone_is_accepted(gateway, obj):
    s3 = client(gateway)

    def add_date(request, **_):
        request.headers["Date"] = email.utils.formatdate(usegmt=True)

    s3.meta.events.register_first("before-sign.s3.GetObject", add_date)
    r = s3.get_object(Bucket=obj, Key="k")
    assert r["Body"].read() == b"payload"


def sigv2_get(gw, path, date):
    to_sign = f"GET\n\n\n{date}\n{path}"
    sig = base64.b64encode(hmac.new(SECRET_KEY.encode(), to_sign.encode(), hashlib.sha1).digest()).decode()
    return raw(gw.endpoint, "GET", path, headers={"Date": date, "Authorization": f"AWS {ACCESS_KEY}:{sig}"})


def test_header_signed_sigv2_must_be_fresh(gateway, obj):
    now = email.utils.formatdate(usegmt=True)
    assert sigv2_get(gateway, f"/{obj}/k", now)[::2] == (200, b"payload")
    stale = email.utils.formatdate(time.time() - 20 * 60, usegmt=True)
    st, _, body = sigv2_get(gateway, f"/{obj}/k", stale)
    assert st == 403 and b"<Code>RequestTimeTooSkewed</Code>" in body, body
    assert f"<RequestTime>{stale}</RequestTime>".encode() in body, body
    assert b"<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>" in body


def test_sigv2_can_be_switched_off(samba, obj):
    g = Gateway(samba, "--sigv2", "off")
    try:
        st, _, body = sigv2_get(g, f"/{obj}/k", email.utils.formatdate(usegmt=True))
        assert st == 400 and b"<Code>InvalidRequest</Code>" in body, body
        assert b"Please use AWS4-HMAC-SHA256." in body
        v2 = client(g, config={"signature_version": "s3"}).generate_presigned_url(
            "get_object", Params={"Bucket": obj, "Key": "k"})
        assert "Signature=" in v2 and fetch(g, v2)[0] == 400
        assert client(g).get_object(Bucket=obj, Key="k")["Body"].read() == b"payload"
    finally:
        g.stop()


def test_errors_carry_aws_messages(gateway):
    bad = boto3.client("s3", endpoint_url=gateway.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key="wrong", config=Config(s3={"addressing_style": "path"},
                                                                    retries={"total_max_attempts": 1}))
    with pytest.raises(ClientError) as e:
        bad.list_buckets()
    assert e.value.response["Error"]["Message"] == (
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.")
    with pytest.raises(ClientError) as e:
        client(gateway).create_bucket(Bucket="Bad_Name")
    assert e.value.response["Error"]["Code"] == "InvalidBucketName"
    assert e.value.response["Error"]["Message"].startswith("The specified bucket is not valid. Bucket names are 3 to 63")


def test_a_debug_log_never_shows_the_signature_a_request_should_have_had(samba):
    """With s3s's own debug log on, a request whose signature does not match
    must not get the right one written to the log (s3s logs it as
    `expected`), where anyone who reads the log could send it (issue 23,
    point 6.4)."""
    gw = Gateway(samba, env={"SMBGATE_LOG": "info,s3s=debug"})
    try:
        req = AWSRequest(method="GET", url=gw.endpoint + "/some-bucket/k",
                         headers={"x-amz-content-sha256": hashlib.sha256(b"").hexdigest()})
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
        headers = dict(req.headers.items())
        right = headers["Authorization"].rsplit("Signature=", 1)[1]
        wrong = right[:-4] + ("0000" if right[-4:] != "0000" else "1111")
        headers["Authorization"] = headers["Authorization"].replace(right, wrong)
        st, _, body = raw(gw.endpoint, "GET", "/some-bucket/k", headers=headers)
        assert st == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body, body
        time.sleep(0.5)
        log = Path(gw.log.name).read_text()
        assert "s3s" in log, "s3s's debug log is on"
        assert right not in log, "the right signature is in the log"
    finally:
        gw.stop()


def test_sigv2_from_boto3_passes_the_constant_time_check_and_a_changed_signature_does_not(gateway, obj):
    """The gateway checks SigV2 itself, in constant time, before s3s does
    (issue 23, point 6.2): what botocore signs must still pass, through
    Content-Type, x-amz-* headers and the sub-resources of the string to
    sign, and one changed character of a signature must not."""
    v2 = client(gateway, config={"signature_version": "s3"})
    v2.put_object(Bucket=obj, Key="v2 key+é", Body=b"two", ContentType="text/x-two", Metadata={"m": "v"},
                  Tagging="t=1")
    got = v2.get_object(Bucket=obj, Key="v2 key+é", ResponseContentType="text/plain")
    assert (got["Body"].read(), got["ContentType"], got["Metadata"]) == (b"two", "text/plain", {"m": "v"})
    assert v2.get_object_tagging(Bucket=obj, Key="v2 key+é")["TagSet"] == [{"Key": "t", "Value": "1"}]
    up = v2.create_multipart_upload(Bucket=obj, Key="v2-mpu")["UploadId"]
    etag = v2.upload_part(Bucket=obj, Key="v2-mpu", UploadId=up, PartNumber=1, Body=b"p1")["ETag"]
    v2.complete_multipart_upload(Bucket=obj, Key="v2-mpu", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert v2.get_object(Bucket=obj, Key="v2-mpu")["Body"].read() == b"p1"
    url = v2.generate_presigned_url("get_object", Params={"Bucket": obj, "Key": "v2 key+é"}, ExpiresIn=600)
    assert "Signature=" in url and fetch(gateway, url)[::2] == (200, b"two")
    # One character of the signature changed: refused, header and URL alike.
    u = urllib.parse.urlparse(url)
    q = urllib.parse.parse_qs(u.query)
    sig = q["Signature"][0]
    q["Signature"] = [("B" if sig[0] == "A" else "A") + sig[1:]]
    st, _, body = raw(gateway.endpoint, "GET", u.path + "?" + urllib.parse.urlencode(q, doseq=True))
    assert st == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body, body
    date = email.utils.formatdate(usegmt=True)
    path = f"/{obj}/k"
    good = base64.b64encode(hmac.new(SECRET_KEY.encode(), f"GET\n\n\n{date}\n{path}".encode(),
                                     hashlib.sha1).digest()).decode()
    bad = ("B" if good[0] == "A" else "A") + good[1:]
    st, _, body = raw(gateway.endpoint, "GET", path, headers={"Date": date, "Authorization": f"AWS {ACCESS_KEY}:{bad}"})
    assert st == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body, body
    st, _, body = raw(gateway.endpoint, "GET", path, headers={"Date": date, "Authorization": f"AWS {ACCESS_KEY}:{good}"})
    assert (st, body) == (200, b"payload")
