"""The access log (issue 12, point 3): with --access-log, one JSON line per
request: request ID (the x-amz-request-id the client got), identity (the
access key, or "anonymous"), operation, method, bucket, key, status, bytes in
and out, duration. The stderr log never carries these lines."""

import time
import urllib.request

from conftest import ACCESS_KEY, SECRET_KEY, Gateway
from s3util import read_lines




def test_one_json_line_per_request_with_what_operators_need(own_samba, tmp_path):
    log = tmp_path / "access.jsonl"
    gw = Gateway(own_samba, env={"SMBGATE_ACCESS_LOG": str(log)})
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="logged")
        put = s3.put_object(Bucket="logged", Key="dir/obj.bin", Body=b"x" * 1000)
        got = s3.get_object(Bucket="logged", Key="dir/obj.bin")
        assert got["Body"].read() == b"x" * 1000
        try:
            s3.get_object(Bucket="logged", Key="missing")
        except s3.exceptions.NoSuchKey as e:
            missing_id = e.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        try:
            urllib.request.urlopen(f"{gw.endpoint}/logged/dir/obj.bin")  # unsigned
        except urllib.error.HTTPError as e:
            assert e.code == 403
        lines = read_lines(log, 5)
        assert len(lines) == 5, lines
        create, p, g, m, anon = lines
        assert (create["operation"], create["bucket"], create["status"]) == ("CreateBucket", "logged", 200)
        assert p["request_id"] == put["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        assert (p["identity"], p["operation"], p["method"]) == (ACCESS_KEY, "PutObject", "PUT")
        assert (p["bucket"], p["key"], p["status"], p["bytes_in"]) == ("logged", "dir/obj.bin", 200, 1000)
        assert (g["operation"], g["status"], g["bytes_out"]) == ("GetObject", 200, 1000)
        assert g["request_id"] == got["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        assert (m["request_id"], m["status"], m["key"]) == (missing_id, 404, "missing")
        assert (anon["identity"], anon["status"]) == ("anonymous", 403)
        assert all(isinstance(l["duration_ms"], float) and l["duration_ms"] >= 0 for l in lines)
        assert all("timestamp" in l for l in lines), lines[0]
        text = log.read_text()
        assert SECRET_KEY not in text
        gw.log.flush()
        assert '"operation"' not in open(gw.log.name).read(), "access lines leaked into the stderr log"
    finally:
        gw.stop()


def test_an_unwritable_access_log_is_refused_at_startup_with_one_line(own_samba, tmp_path):
    import pytest
    with pytest.raises(RuntimeError) as e:
        Gateway(own_samba, env={"SMBGATE_ACCESS_LOG": str(tmp_path / "no" / "such" / "dir" / "a.log")})
    assert "smbgate: --access-log:" in str(e.value) and "No such file or directory" in str(e.value)


def test_sighup_reopens_the_file_for_logrotate(own_samba, tmp_path):
    # Issue 25, point 4: logrotate moves the file away and sends SIGHUP;
    # the lines after it go to a new file at the same path.
    import signal
    log = tmp_path / "access.jsonl"
    gw = Gateway(own_samba, env={"SMBGATE_ACCESS_LOG": str(log), "SMBGATE_LOG": "info"})
    try:
        s3 = gw.client()
        s3.list_buckets()
        assert len(read_lines(log, 1)) == 1
        rotated = tmp_path / "access.jsonl.1"
        log.rename(rotated)
        s3.list_buckets()  # still to the moved file, until the signal
        assert len(read_lines(rotated, 2)) == 2
        gw.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "access log reopened" not in open(gw.log.name).read() and time.monotonic() < deadline:
            time.sleep(0.05)
        r = s3.list_buckets()
        lines = read_lines(log, 1)
        assert [l["request_id"] for l in lines] == [r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]]
        assert len(read_lines(rotated, 2)) == 2
    finally:
        gw.stop()


def test_without_s3_users_lines_still_name_the_operation(own_samba, tmp_path):
    """With --anonymous and no S3 users, s3s ran no access check, so lines
    said operation "unknown" and no bucket or key; and a signed request was
    501 (no authentication provider), where AWS answers an unknown key."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    from conftest import REGION
    log = tmp_path / "access.jsonl"
    gw = Gateway(own_samba, "--anonymous",
                 env={"SMBGATE_ACCESS_KEY": None, "SMBGATE_SECRET_KEY": None, "SMBGATE_ACCESS_LOG": str(log)})
    try:
        s3 = boto3.client("s3", endpoint_url=gw.endpoint, region_name=REGION,
                          config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="open-logged")
        s3.put_object(Bucket="open-logged", Key="k", Body=b"x")
        lines = read_lines(log, 2)
        assert [(l["operation"], l.get("bucket"), l.get("key"), l["identity"]) for l in lines] == [
            ("CreateBucket", "open-logged", None, "anonymous"), ("PutObject", "open-logged", "k", "anonymous")]
        try:
            gw.client().get_object(Bucket="open-logged", Key="k")
            raise AssertionError("a signed request without users was served")
        except s3.exceptions.ClientError as e:
            assert (e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]) == \
                (403, "InvalidAccessKeyId")
    finally:
        gw.stop()


def test_bytes_out_counts_every_body_and_a_bad_signature_names_its_key_and_bucket(own_samba, tmp_path):
    """Issue 43, item 6: `bytes_out` and `smbgate_s3_sent_bytes_total` read
    Content-Length only, which s3s's XML answers (listings, errors) and
    streamed ones (CompleteMultipartUpload) do not set: every such answer
    counted 0. And a request whose signature did not match was logged with
    no access key and no bucket."""
    import urllib.parse
    from conftest import _free_port
    from s3util import raw, urlopen
    from test_metrics import value
    log = tmp_path / "access.jsonl"
    mport = _free_port()
    gw = Gateway(own_samba, env={"SMBGATE_ACCESS_LOG": str(log), "SMBGATE_METRICS_LISTEN": f"127.0.0.1:{mport}"})
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="tallied")
        s3.put_object(Bucket="tallied", Key="a.txt", Body=b"abc")
        up = s3.create_multipart_upload(Bucket="tallied", Key="mp.bin")["UploadId"]
        etag = s3.upload_part(Bucket="tallied", Key="mp.bin", UploadId=up, PartNumber=1, Body=b"p")["ETag"]
        n = 4
        got = {}
        v4 = gw.client(signature_version="s3v4")
        for op, params in (("list_objects_v2", {"Bucket": "tallied"}),
                           ("get_object", {"Bucket": "tallied", "Key": "missing"})):
            status, body = urlopen(v4.generate_presigned_url(op, Params=params))
            got[op] = (status, len(body))
            n += 1
        complete = urllib.parse.urlsplit(v4.generate_presigned_url(
            "complete_multipart_upload", Params={"Bucket": "tallied", "Key": "mp.bin", "UploadId": up}))
        xml = f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>" \
              "</CompleteMultipartUpload>"
        status, _, body = raw(gw.endpoint, "POST", f"{complete.path}?{complete.query}", body=xml.encode())
        assert status == 200 and b"<CompleteMultipartUploadResult" in body, body
        got["complete"] = (200, len(body))
        n += 1
        bad = gw.client(secret_key="not-the-secret")
        try:
            bad.list_objects_v2(Bucket="tallied")
            raise AssertionError("a bad signature was served")
        except bad.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "SignatureDoesNotMatch"
        n += 1
        lines = read_lines(log, n)
        assert len(lines) == n, lines
        listing, missing, done, refused = lines[4:]
        assert (listing["operation"], listing["status"], listing["bytes_out"]) == \
            ("ListObjectsV2", 200, got["list_objects_v2"][1])
        assert (missing["status"], missing["bytes_out"]) == (404, got["get_object"][1])
        assert (done["operation"], done["bytes_out"]) == ("CompleteMultipartUpload", got["complete"][1])
        assert [v[0] for v in got.values()] == [200, 404, 200]
        assert min(v[1] for v in got.values()) > 100
        assert (refused["status"], refused["access_key"], refused["bucket"]) == (403, ACCESS_KEY, "tallied")
        assert refused["bytes_out"] > 100
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        assert value(metrics, "smbgate_s3_sent_bytes_total") == sum(l["bytes_out"] for l in lines)
    finally:
        gw.stop()
