"""Bucket CORS (issue 12, point 5): PutBucketCors, GetBucketCors and
DeleteBucketCors stored on the share; preflight OPTIONS answered as AWS
does (400 without Origin or method, 403 when no rule matches or CORS is
off); Access-Control-* headers on actual requests; and a real browser
(headless Chromium) uploading and downloading with presigned URLs from a
page of another origin."""

import json
import uuid

import pytest

from conftest import Gateway, _free_port
from s3util import browse, expect_error, raw

RULES = [
    {"AllowedOrigins": ["http://app.example"], "AllowedMethods": ["PUT", "GET"],
     "AllowedHeaders": ["content-type", "x-amz-*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600},
    {"ID": "readers", "AllowedOrigins": ["*"], "AllowedMethods": ["GET", "HEAD"]},
]


@pytest.fixture
def cors_bucket(s3):
    name = f"cors-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": RULES})
    return name


def test_cors_configuration_round_trips_and_lives_on_the_share(s3, bucket, samba):
    expect_error(404, "NoSuchCORSConfiguration", s3.get_bucket_cors, Bucket=bucket)
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert got == [
        {"AllowedOrigins": ["http://app.example"], "AllowedMethods": ["PUT", "GET"],
         "AllowedHeaders": ["content-type", "x-amz-*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600},
        {"ID": "readers", "AllowedOrigins": ["*"], "AllowedMethods": ["GET", "HEAD"]},
    ]
    stored = samba.share_path / ".smbgate" / "cors" / bucket
    assert json.loads(stored.read_text())["rules"][1]["id"] == "readers"
    s3.delete_bucket_cors(Bucket=bucket)
    expect_error(404, "NoSuchCORSConfiguration", s3.get_bucket_cors, Bucket=bucket)
    assert not stored.exists()
    expect_error(404, "NoSuchBucket", s3.put_bucket_cors, Bucket="no-such-bucket-cors",
                 CORSConfiguration={"CORSRules": RULES})


def test_bad_cors_configurations_are_refused_with_aws_messages(s3, bucket):
    r = expect_error(400, "InvalidRequest", s3.put_bucket_cors, Bucket=bucket, CORSConfiguration={
        "CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]})
    assert r["Error"]["Message"] == "Found unsupported HTTP method in CORS config. Unsupported method is PATCH"
    r = expect_error(400, "InvalidRequest", s3.put_bucket_cors, Bucket=bucket, CORSConfiguration={
        "CORSRules": [{"AllowedOrigins": ["http://*.a.*"], "AllowedMethods": ["GET"]}]})
    assert r["Error"]["Message"] == 'AllowedOrigin "http://*.a.*" can not have more than one wildcard.'
    expect_error(404, "NoSuchCORSConfiguration", s3.get_bucket_cors, Bucket=bucket)


def preflight(gw, path, **headers):
    return raw(gw.endpoint, "OPTIONS", path, headers={k.replace("_", "-"): v for k, v in headers.items()})


def test_preflights_are_answered_as_aws_does(gateway, cors_bucket, bucket):
    ok, h, body = preflight(gateway, f"/{cors_bucket}/photo.jpg", Origin="http://app.example",
                            Access_Control_Request_Method="PUT",
                            Access_Control_Request_Headers="Content-Type, X-Amz-Meta-Camera")
    assert (ok, body) == (200, b"")
    assert h["access-control-allow-origin"] == "http://app.example"
    assert h["access-control-allow-methods"] == "PUT, GET"
    assert h["access-control-allow-headers"] == "Content-Type, X-Amz-Meta-Camera"
    assert h["access-control-expose-headers"] == "ETag"
    assert h["access-control-max-age"] == "600"
    assert h["access-control-allow-credentials"] == "true"
    assert "x-amz-request-id" in h
    # The second rule: any origin may GET.
    st, h, _ = preflight(gateway, f"/{cors_bucket}/photo.jpg", Origin="http://other.example",
                         Access_Control_Request_Method="GET")
    assert (st, h["access-control-allow-origin"], h["access-control-allow-methods"]) == (200, "*", "GET, HEAD")
    # No rule allows these.
    for kw in [dict(Origin="http://other.example", Access_Control_Request_Method="PUT"),
               dict(Origin="http://app.example", Access_Control_Request_Method="DELETE"),
               dict(Origin="http://app.example", Access_Control_Request_Method="PUT",
                    Access_Control_Request_Headers="authorization")]:
        st, h, body = preflight(gateway, f"/{cors_bucket}/photo.jpg", **kw)
        assert st == 403, kw
        assert b"<Code>AccessForbidden</Code>" in body and b"CORS request is not allowed" in body
        assert "access-control-allow-origin" not in h
        assert b"<RequestId>" in body
    # A bucket without CORS, and requests without Origin or method.
    st, _, body = preflight(gateway, f"/{bucket}/x", Origin="http://app.example", Access_Control_Request_Method="GET")
    assert st == 403 and b"CORS is not enabled for this bucket" in body
    st, _, body = preflight(gateway, f"/{cors_bucket}/x", Access_Control_Request_Method="GET")
    assert st == 400 and b"Origin request header needed" in body
    assert preflight(gateway, f"/{cors_bucket}/x", Origin="http://app.example")[0] == 400


def test_a_preflight_names_no_path_outside_the_buckets(gateway, bucket):
    """A preflight is never signed, so its bucket is checked with S3's naming
    rules before the share is asked anything (issue 23, point 5). A path that
    climbs out of the buckets gets the answer of a bucket without CORS,
    whether or not what it names exists on the share: nothing tells an
    anonymous client which paths exist, and nothing is read as the gateway's
    own account."""
    missing = f"nope-{uuid.uuid4().hex[:8]}"
    for path in [f"/..%2F{bucket}/x", f"/..%2F..%2F{bucket}", f"/..%2F{missing}", f"/{bucket}%2F..%2F{bucket}",
                 f"/..%5C{bucket}", "/..", "/.smbgate", "/a%00b"]:
        st, h, body = preflight(gateway, path, Origin="http://app.example", Access_Control_Request_Method="GET")
        assert (st, b"CORS is not enabled for this bucket" in body) == (403, True), (path, st, body)
        assert "access-control-allow-origin" not in h


def test_a_plain_options_on_a_presigned_url_is_400(s3, gateway, cors_bucket):
    url = s3.generate_presigned_url("get_object", Params={"Bucket": cors_bucket, "Key": "k"}, ExpiresIn=300)
    path = url[len(gateway.endpoint):]
    st, _, body = raw(gateway.endpoint, "OPTIONS", path)
    assert st == 400 and b"<Code>BadRequest</Code>" in body


def test_actual_requests_with_an_origin_get_the_rules_headers(s3, gateway, cors_bucket):
    s3.put_object(Bucket=cors_bucket, Key="k", Body=b"hello")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": cors_bucket, "Key": "k"}, ExpiresIn=300)
    path = url[len(gateway.endpoint):]
    st, h, body = raw(gateway.endpoint, "GET", path, headers={"Origin": "http://app.example"})
    assert (st, body) == (200, b"hello")
    assert (h["access-control-allow-origin"], h["access-control-expose-headers"]) == ("http://app.example", "ETag")
    # Errors carry them too, so that a page can read the error.
    missing = s3.generate_presigned_url("get_object", Params={"Bucket": cors_bucket, "Key": "gone"}, ExpiresIn=300)
    st, h, _ = raw(gateway.endpoint, "GET", missing[len(gateway.endpoint):], headers={"Origin": "http://x.example"})
    assert (st, h["access-control-allow-origin"]) == (404, "*")
    # No matching rule, or no Origin: no CORS headers.
    st, h, _ = raw(gateway.endpoint, "DELETE", f"/{cors_bucket}/k", headers={"Origin": "http://x.example"})
    assert st == 403 and "access-control-allow-origin" not in h
    st, h, _ = raw(gateway.endpoint, "GET", path)
    assert st == 200 and "access-control-allow-origin" not in h


def test_another_instance_applies_the_rules_at_once(samba, s3, cors_bucket):
    other = Gateway(samba)
    try:
        st, h, _ = preflight(other, f"/{cors_bucket}/k", Origin="http://app.example",
                             Access_Control_Request_Method="PUT")
        assert (st, h["access-control-allow-origin"]) == (200, "http://app.example")
    finally:
        other.stop()


PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const out = {};
  try {
    const put = await fetch(%(put)s, {method: "PUT", body: "from the browser", headers: {"Content-Type": "text/plain"}});
    out.put = put.status; out.etag = put.headers.get("ETag");
    const get = await fetch(%(get)s);
    out.get = get.status; out.body = await get.text();
  } catch (e) { out.error = String(e); }
  try { await fetch(%(blocked)s, {method: "PUT", body: "x"}); out.blocked = "sent"; }
  catch (e) { out.blocked = String(e); }
  document.getElementById("out").textContent = JSON.stringify(out);
})();
</script></body></html>"""


def test_a_browser_uploads_and_downloads_with_presigned_urls(s3, gateway, samba, bucket, tmp_path):
    name = f"browser-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": [origin], "AllowedMethods": ["PUT", "GET"], "AllowedHeaders": ["*"],
         "ExposeHeaders": ["ETag"]}]})
    # SigV4 presigned URLs sign only the host, so the page may send any
    # Content-Type (SigV2 would sign it).
    v4 = gateway.client(signature_version="s3v4")
    put = v4.generate_presigned_url("put_object", Params={"Bucket": name, "Key": "upload.txt"}, ExpiresIn=300)
    get = v4.generate_presigned_url("get_object", Params={"Bucket": name, "Key": "upload.txt"}, ExpiresIn=300)
    blocked = v4.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "nope"}, ExpiresIn=300)
    (tmp_path / "index.html").write_text(PAGE % {"put": json.dumps(put), "get": json.dumps(get),
                                                 "blocked": json.dumps(blocked)})
    out = json.loads(browse(tmp_path, port, "index.html"))
    assert (out.get("put"), out.get("get"), out.get("body")) == (200, 200, "from the browser"), out
    assert out["etag"] == '"%s"' % __import__("hashlib").md5(b"from the browser").hexdigest()
    assert out["blocked"] == "TypeError: Failed to fetch"
    assert (samba.share_path / name / "upload.txt").read_bytes() == b"from the browser"
    assert not (samba.share_path / bucket / "nope").exists()
