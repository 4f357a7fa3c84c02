"""POST Object: uploads from an HTML form (issue 22, point 1).

A form posted to a bucket's URL (multipart/form-data) with a policy signed
with SigV4 or SigV2, or unsigned where anonymous access is on. The policy's
conditions decide what may be uploaded; the file streams to the share like
a PUT body; the answer is what the form asks for (a redirect, 200, 201 with
a PostResponse document, 204). Driven by boto3's generate_presigned_post
with requests, by hand-built forms for what boto3 cannot send, and by
headless Chromium submitting a form from a page of another origin."""

import base64
import datetime
import hashlib
import hmac
import json
import urllib.parse
import xml.etree.ElementTree as ET

import boto3
import pytest
import requests
from botocore.config import Config

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway, _free_port
from s3util import browse, peak_rss_mib, wait_no_tmp

TAGGING = "<Tagging><TagSet><Tag><Key>from</Key><Value>form</Value></Tag></TagSet></Tagging>"


def post(gw, bucket, fields, file=("f.txt", b"data"), file_field="file"):
    return requests.post(f"{gw.endpoint}/{bucket}", data=fields, files={file_field: file},
                         allow_redirects=False, timeout=60)


@pytest.fixture
def v4(gateway):
    """A client that signs forms with SigV4 (boto3 signs them with SigV2
    unless told)."""
    return gateway.client(signature_version="s3v4")


def code(resp):
    """(status, S3 error code) of an answer with an error document."""
    return resp.status_code, ET.fromstring(resp.content).findtext("Code")


def sigv4_form(policy_json, key=ACCESS_KEY, secret=SECRET_KEY, region=REGION, when=None):
    """Fields of a form signed by hand with SigV4 (for policies boto3 will
    not write), computed with Python's hmac, independent of the gateway."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    date, stamp = when.strftime("%Y%m%d"), when.strftime("%Y%m%dT%H%M%SZ")
    credential = f"{key}/{date}/{region}/s3/aws4_request"
    policy = base64.b64encode(policy_json.encode()).decode()
    k = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return {"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": credential, "x-amz-date": stamp,
            "policy": policy, "x-amz-signature": hmac.new(k, policy.encode(), hashlib.sha256).hexdigest()}


def test_a_presigned_post_from_boto3_stores_the_file_with_its_fields(s3, v4, gateway, bucket):
    fields = {"Content-Type": "text/plain", "x-amz-meta-who": "form", "success_action_status": "201",
              "tagging": TAGGING, "Cache-Control": "max-age=60"}
    conditions = [{"Content-Type": "text/plain"}, {"x-amz-meta-who": "form"}, {"success_action_status": "201"},
                  {"tagging": TAGGING}, {"Cache-Control": "max-age=60"}, ["content-length-range", 1, 1000]]
    p = v4.generate_presigned_post(bucket, "uploads/${filename}", Fields=fields, Conditions=conditions,
                                   ExpiresIn=300)
    assert "x-amz-signature" in p["fields"]
    assert p["url"] == f"{gateway.endpoint}/{bucket}"
    r = post(gateway, bucket, p["fields"], file=("hello world.txt", b"hello from a form"))
    etag = '"%s"' % hashlib.md5(b"hello from a form").hexdigest()
    assert r.status_code == 201, r.text
    doc = ET.fromstring(r.content)
    assert doc.tag == "PostResponse"
    assert (doc.findtext("Bucket"), doc.findtext("Key"), doc.findtext("ETag")) == (
        bucket, "uploads/hello world.txt", etag)
    assert doc.findtext("Location") == f"{gateway.endpoint}/{bucket}/uploads/hello%20world.txt"
    assert (r.headers["ETag"], r.headers["Location"]) == (etag, doc.findtext("Location"))
    got = s3.get_object(Bucket=bucket, Key="uploads/hello world.txt")
    assert got["Body"].read() == b"hello from a form"
    assert (got["ContentType"], got["Metadata"], got["CacheControl"], got["ETag"]) == (
        "text/plain", {"who": "form"}, "max-age=60", etag)
    assert s3.get_object_tagging(Bucket=bucket, Key="uploads/hello world.txt")["TagSet"] == [
        {"Key": "from", "Value": "form"}]


def test_the_answer_is_what_the_form_asks_for(s3, v4, gateway, bucket):
    def upload(key, extra):
        p = v4.generate_presigned_post(bucket, key, Fields=extra, Conditions=[{k: v} for k, v in extra.items()])
        return post(gateway, bucket, p["fields"], file=("x", key.encode()))

    r = upload("plain", {})
    assert (r.status_code, r.content) == (204, b"")
    assert r.headers["ETag"] == '"%s"' % hashlib.md5(b"plain").hexdigest()
    r = upload("ok", {"success_action_status": "200"})
    assert (r.status_code, r.content) == (200, b"")
    r = upload("other", {"success_action_status": "299"})
    assert r.status_code == 204
    r = upload("dir/r e", {"success_action_redirect": "http://app.example/done?x=1"})
    assert r.status_code == 303
    to = urllib.parse.urlsplit(r.headers["Location"])
    assert (to.scheme, to.netloc, to.path) == ("http", "app.example", "/done")
    assert urllib.parse.parse_qs(to.query) == {
        "x": ["1"], "bucket": [bucket], "key": ["dir/r e"], "etag": ['"%s"' % hashlib.md5(b"dir/r e").hexdigest()]}
    for key in ("plain", "ok", "other", "dir/r e"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()


def test_a_sigv2_form_is_accepted(gateway, bucket):
    v2 = gateway.client(signature_version="s3")
    p = v2.generate_presigned_post(bucket, "v2.txt")
    assert "signature" in p["fields"] and "AWSAccessKeyId" in p["fields"]
    r = post(gateway, bucket, p["fields"], file=("v2.txt", b"signed with v2"))
    assert r.status_code == 204, r.text
    assert gateway.client().get_object(Bucket=bucket, Key="v2.txt")["Body"].read() == b"signed with v2"
    p["fields"]["signature"] = base64.b64encode(b"x" * 20).decode()
    assert code(post(gateway, bucket, p["fields"])) == (403, "SignatureDoesNotMatch")


def test_refused_forms_store_nothing(s3, v4, gateway, bucket, samba):
    def presigned(key="k", fields=None, conditions=None, expires=300, client=v4):
        return client.generate_presigned_post(bucket, key, Fields=fields, Conditions=conditions,
                                              ExpiresIn=expires)["fields"]

    ranged = presigned(conditions=[["content-length-range", 5, 10]])
    assert code(post(gateway, bucket, ranged, file=("f", b"x" * 11))) == (400, "EntityTooLarge")
    assert code(post(gateway, bucket, ranged, file=("f", b"x" * 4))) == (400, "EntityTooSmall")
    # A condition the form breaks, a field no condition names, an expired
    # policy: 403 AccessDenied with AWS's words.
    r = post(gateway, bucket, dict(presigned(conditions=[["starts-with", "$key", "up/"]])))
    assert code(r) == (403, "AccessDenied")
    assert ET.fromstring(r.content).findtext("Message") == \
        'Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "up/"]'
    r = post(gateway, bucket, dict(presigned(), **{"x-amz-meta-extra": "1"}))
    assert (code(r), ET.fromstring(r.content).findtext("Message")) == (
        (403, "AccessDenied"), "Invalid according to Policy: Extra input fields: x-amz-meta-extra")
    r = post(gateway, bucket, presigned(expires=-10))
    assert (code(r), ET.fromstring(r.content).findtext("Message")) == (
        (403, "AccessDenied"), "Invalid according to Policy: Policy expired.")
    # Another value than the signed one, a wrong signature, an unknown key.
    tampered = presigned(fields={"Content-Type": "text/plain"}, conditions=[{"Content-Type": "text/plain"}])
    tampered["Content-Type"] = "text/html"
    assert code(post(gateway, bucket, tampered)) == (403, "AccessDenied")
    bad = dict(presigned(), **{"x-amz-signature": "0" * 64})
    assert code(post(gateway, bucket, bad)) == (403, "SignatureDoesNotMatch")
    stranger = boto3.client("s3", endpoint_url=gateway.endpoint, region_name=REGION,
                            aws_access_key_id="AKNOSUCHKEY000000000", aws_secret_access_key="x",
                            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    assert code(post(gateway, bucket, presigned(client=stranger))) == (403, "InvalidAccessKeyId")
    # A form without a key field, or without a file; a policy that is not
    # JSON (signed by hand, so that only its content is wrong).
    no_key = {k: v for k, v in presigned().items() if k != "key"}
    assert code(post(gateway, bucket, no_key)) == (400, "InvalidArgument")
    assert code(post(gateway, bucket, presigned(), file_field="other")) == (
        400, "IncorrectNumberOfFilesInPostRequest")
    assert code(post(gateway, bucket, dict(sigv4_form("not json"), key="k"))) == (400, "InvalidPolicyDocument")
    # A form to an object's URL.
    r = requests.post(f"{gateway.endpoint}/{bucket}/k", data=presigned(), files={"file": ("f", b"x")}, timeout=30)
    assert code(r) == (405, "MethodNotAllowed")
    # Issue 41, item 4: a form posted to another bucket than its policy
    # names is refused by the policy (403, as AWS answers), and a policy
    # whose expiration is no ISO 8601 date is no policy (400).
    s3.create_bucket(Bucket=f"{bucket}-other")
    r = requests.post(f"{gateway.endpoint}/{bucket}-other", data=presigned(), files={"file": ("f", b"x")}, timeout=30)
    assert (code(r), ET.fromstring(r.content).findtext("Message")) == ((403, "AccessDenied"), (
        f'Invalid according to Policy: Policy Condition failed: ["eq", "$bucket", "{bucket}"]'))
    assert s3.list_objects_v2(Bucket=f"{bucket}-other").get("KeyCount") == 0
    for expiration in ("2030-01-01", "Tue, 01 Jan 2030 00:00:00 GMT", "2030-01-01T00:00:00", "1893456000"):
        policy = json.dumps({"expiration": expiration, "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""]]})
        assert code(post(gateway, bucket, dict(sigv4_form(policy), key="k"))) == (400, "InvalidPolicyDocument")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert wait_no_tmp(samba) == []


def test_a_hand_signed_policy_with_every_condition_form(gateway, bucket):
    """Object and array forms of exact match, starts-with with an empty
    prefix, field names in any case: what boto3 writes is not all a
    policy may say."""
    expiration = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5))
    now = datetime.datetime.now(datetime.timezone.utc)
    date, stamp = now.strftime("%Y%m%d"), now.strftime("%Y%m%dT%H%M%SZ")
    credential = f"{ACCESS_KEY}/{date}/{REGION}/s3/aws4_request"
    policy = json.dumps({"expiration": expiration.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "conditions": [
        {"bucket": bucket}, ["eq", "$KEY", "hand/made"], ["starts-with", "$Content-Type", ""],
        ["starts-with", "$x-amz-meta-note", "n"], {"acl": "private"},
        {"x-amz-algorithm": "AWS4-HMAC-SHA256"}, {"x-amz-credential": credential}, {"x-amz-date": stamp}]})
    fields = sigv4_form(policy, when=now)
    fields.update({"Key": "hand/made", "X-Amz-Meta-Note": "noted", "ACL": "private", "x-ignore-this": "1"})
    r = post(gateway, bucket, fields, file=("f", b"by hand"))
    assert r.status_code == 204, r.text
    h = gateway.client().head_object(Bucket=bucket, Key="hand/made")
    assert h["Metadata"] == {"note": "noted"}


def test_an_unsigned_form_needs_anonymous_access(samba, gateway, bucket):
    assert code(post(gateway, bucket, {"key": "anon"})) == (403, "AccessDenied")
    anon = Gateway(samba, "--anonymous", "--anonymous-bucket", bucket, "--anonymous-write")
    try:
        r = post(anon, bucket, {"key": "anon", "Content-Type": "image/png"}, file=("a.png", b"\x89PNG"))
        assert r.status_code == 204, r.text
        got = gateway.client().get_object(Bucket=bucket, Key="anon")
        assert (got["Body"].read(), got["ContentType"]) == (b"\x89PNG", "image/png")
    finally:
        anon.stop()


def streamed_form(fields, size, boundary="smbgate-form-boundary"):
    """A multipart/form-data body of `fields` and a file of `size` bytes
    (a repeating pattern), made as it is sent."""
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items())
    head += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n'.encode()
    chunk = bytes(range(256)) * 4096

    def body():
        yield head
        for _ in range(size // len(chunk)):
            yield chunk
        yield f"\r\n--{boundary}--\r\n".encode()
    return body(), f"multipart/form-data; boundary={boundary}"


def test_a_large_file_streams_to_the_share(s3, v4, gateway, bucket):
    """The file part goes to the share as it arrives: 768 MiB through one
    form (sent chunked, so without a length) moves the gateway's peak RSS
    by well under half the file. A form read whole, as s3s reads it, would
    move it by the whole file at least; what does move it is the PUT
    pipeline's buffers and the allocator's arenas, which stop growing."""
    size = 768 << 20
    p = v4.generate_presigned_post(bucket, "big.bin", Conditions=[["content-length-range", 0, size]])
    post(gateway, bucket, p["fields"], file=("warm", b"w"))  # warm up
    pid = gateway.proc.pid
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = peak_rss_mib(pid)
    body, content_type = streamed_form(p["fields"], size)
    r = requests.post(f"{gateway.endpoint}/{bucket}", data=body, headers={"Content-Type": content_type},
                      timeout=300)
    assert r.status_code == 204, r.text
    grew = peak_rss_mib(pid) - base
    assert grew < 384, f"peak RSS grew by {grew:.1f} MiB for a 768 MiB form"
    md5, chunk = hashlib.md5(), bytes(range(256)) * 4096
    for _ in range(size // len(chunk)):
        md5.update(chunk)
    assert r.headers["ETag"] == '"%s"' % md5.hexdigest()
    assert s3.head_object(Bucket=bucket, Key="big.bin")["ContentLength"] == size
    s3.delete_object(Bucket=bucket, Key="big.bin")


PAGE = """<!doctype html><html><body>
<form id="f" method="post" enctype="multipart/form-data" action=%(action)s></form>
<script>
const fields = %(fields)s;
const form = document.getElementById("f");
for (const [k, v] of Object.entries(fields)) {
  const i = document.createElement("input");
  i.type = "hidden"; i.name = k; i.value = v; form.appendChild(i);
}
const file = document.createElement("input");
file.type = "file"; file.name = "file"; form.appendChild(file);
const dt = new DataTransfer();
dt.items.add(new File(["uploaded by a browser form"], "photo.txt", {type: "text/plain"}));
file.files = dt.files;
form.submit();
</script></body></html>"""

DONE = """<!doctype html><html><body><pre id="out"></pre>
<script>document.getElementById("out").textContent = location.search;</script></body></html>"""


def test_a_browser_form_on_another_origin_uploads_and_is_redirected(s3, v4, gateway, bucket, tmp_path):
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    fields = {"Content-Type": "text/plain", "x-amz-meta-camera": "none",
              "success_action_redirect": f"{origin}/done.html"}
    p = v4.generate_presigned_post(bucket, "browser/${filename}", Fields=fields,
                                   Conditions=[{k: v} for k, v in fields.items()], ExpiresIn=300)
    (tmp_path / "index.html").write_text(PAGE % {"action": json.dumps(p["url"]), "fields": json.dumps(p["fields"])})
    (tmp_path / "done.html").write_text(DONE)
    search = browse(tmp_path, port, "index.html")
    body = b"uploaded by a browser form"
    assert urllib.parse.parse_qs(search.lstrip("?")) == {
        "bucket": [bucket], "key": ["browser/photo.txt"], "etag": ['"%s"' % hashlib.md5(body).hexdigest()]}
    got = s3.get_object(Bucket=bucket, Key="browser/photo.txt")
    assert (got["Body"].read(), got["ContentType"], got["Metadata"]) == (body, "text/plain", {"camera": "none"})


def test_a_field_given_twice_is_refused(v4, gateway, s3, bucket):
    """Issue 43, item 5: a second `key` could stand beside the one the
    policy's `eq` checked; which one counts would depend on the parser."""
    p = v4.generate_presigned_post(bucket, "twice", Conditions=[{"key": "twice"}], ExpiresIn=300)
    fields = list(p["fields"].items()) + [("Key", "other")]
    r = requests.post(f"{gateway.endpoint}/{bucket}", data=fields, files={"file": ("f", b"x")},
                      allow_redirects=False, timeout=60)
    assert code(r) == (400, "InvalidArgument"), r.text
    for k in ("twice", "other"):
        with pytest.raises(Exception):
            s3.head_object(Bucket=bucket, Key=k)


def test_an_unsigned_form_redirects_only_where_allowed(samba, gateway, bucket):
    """Issue 43, item 5: anybody may post an unsigned form, so its
    redirect would make the gateway an open redirector; allowed only with
    --anonymous-form-redirect."""
    fields = {"key": "anon-redirect", "success_action_redirect": "https://example.com/done"}
    for allow, expected in (("off", 403), ("on", 303)):
        anon = Gateway(samba, "--anonymous", "--anonymous-bucket", bucket, "--anonymous-write",
                       "--anonymous-form-redirect", allow)
        try:
            r = post(anon, bucket, fields)
            assert r.status_code == expected, r.text
            if allow == "off":
                assert code(r) == (403, "AccessDenied")
                with pytest.raises(Exception):
                    gateway.client().head_object(Bucket=bucket, Key="anon-redirect")
            else:
                assert r.headers["Location"].startswith("https://example.com/done?")
        finally:
            anon.stop()
