"""Request IDs and what gets logged (issue 11, item 6; issue 12, item 6):
every answer carries `x-amz-request-id` and `x-amz-id-2`, every error body
carries the same values as `<RequestId>` and `<HostId>`, and each answer is
logged once under its request ID: server faults at ERROR, client errors not
at all at the default level (s3s logged each 403 at ERROR, twice)."""

import re
import subprocess
import time
import urllib.parse
import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, Gateway
from s3util import raw


def ids_of(resp):
    md = resp["ResponseMetadata"]
    return md["HTTPHeaders"]["x-amz-request-id"], md["HTTPHeaders"]["x-amz-id-2"]


def test_every_answer_carries_request_ids(s3, bucket):
    seen = set()
    for r in (s3.put_object(Bucket=bucket, Key="k", Body=b"v"), s3.get_object(Bucket=bucket, Key="k"),
              s3.head_object(Bucket=bucket, Key="k"), s3.list_objects_v2(Bucket=bucket), s3.list_buckets()):
        rid, host = ids_of(r)
        assert re.fullmatch(r"[0-9A-F]{16}", rid), rid
        assert re.fullmatch(r"[A-Za-z0-9+/]{32}", host), host
        seen.add(rid)
    assert len(seen) == 5, "each request has its own ID"


@pytest.mark.parametrize("case", ["NoSuchKey", "AccessDenied"])
def test_error_bodies_carry_the_request_id(gateway, s3, bucket, case):
    if case == "NoSuchKey":
        url = urllib.parse.urlparse(s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "no"}))
        path = url.path + "?" + url.query
    else:
        path = f"/{bucket}"  # unsigned: refused by the access check
    st, h, body = raw(gateway.endpoint, "GET", path)
    assert st == (404 if case == "NoSuchKey" else 403), body
    text = body.decode()
    assert f"<Code>{case}</Code>" in text
    assert f"<RequestId>{h['x-amz-request-id']}</RequestId>" in text, text
    assert f"<HostId>{h['x-amz-id-2']}</HostId>" in text, text
    assert text.count("<RequestId>") == 1


@pytest.fixture(scope="module")
def lgw(own_samba):
    g = Gateway(own_samba, env={"SMBGATE_LOG": None})  # the default log level
    yield g
    g.stop()


def log_lines(gw):
    gw.log.flush()
    return open(gw.log.name, errors="replace").read().splitlines()


def test_client_errors_stay_out_of_the_default_log_and_server_faults_log_once(lgw, own_samba):
    s3 = lgw.client()
    bucket = f"log-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="missing")
    bad = boto3.client("s3", endpoint_url=lgw.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key="wrong",
                       config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
    with pytest.raises(ClientError) as denied:
        bad.list_buckets()
    time.sleep(0.2)
    # The failed authentication is the one WARN line (issue 25, point 4:
    # operators must see it); the NoSuchKey leaves nothing.
    rid = denied.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    loud = [ln for ln in log_lines(lgw) if "ERROR" in ln or "WARN" in ln]
    assert len(loud) == 1 and " WARN " in loud[0] and "authentication failed" in loud[0] and rid in loud[0], loud

    # A server fault: smbd is gone, the GET answers 503; one ERROR line,
    # with the request's ID and operation.
    subprocess.run(["pkill", "-9", "-f", f"{own_samba.env['SMB_DIR']}/smb.conf"], check=False)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="k")
    rid = e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    time.sleep(0.2)
    mine = [ln for ln in log_lines(lgw) if rid in ln]
    assert len(mine) == 1, mine
    assert "ERROR" in mine[0] and "operation=GetObject" in mine[0] and "status=503" in mine[0], mine[0]


def test_a_log_level_setting_keeps_s3s_quiet_unless_it_names_s3s(samba):
    """SMBGATE_LOG=info (what deploy/smbgate.env sets) must not bring back
    s3s's ERROR line for every client error."""
    g = Gateway(samba, env={"SMBGATE_LOG": "info"})
    try:
        bad = boto3.client("s3", endpoint_url=g.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                           aws_secret_access_key="wrong",
                           config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        with pytest.raises(ClientError):
            bad.list_buckets()
        time.sleep(0.2)
        assert [ln for ln in log_lines(g) if "ERROR" in ln or "s3s" in ln] == []
    finally:
        g.stop()
