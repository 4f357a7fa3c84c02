"""Failed authentications are visible (issue 25, point 4): each is logged
at WARN with its reason, the access key it named, the client's address and
the request ID (never a secret), at most 10 lines a second, and counted by
reason in `/metrics`. Other client errors stay out of the default log."""

import re
import time
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway, _free_port


@pytest.fixture(scope="module")
def agw(own_samba):
    port = _free_port()
    g = Gateway(own_samba, env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{port}"})
    g.admin = f"http://127.0.0.1:{port}"
    yield g
    g.stop()


def client(gw, key=ACCESS_KEY, secret=SECRET_KEY, region=REGION):
    return boto3.client("s3", endpoint_url=gw.endpoint, region_name=region, aws_access_key_id=key,
                        aws_secret_access_key=secret,
                        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))


def refused(call):
    """The (S3 error code, request ID) of a call that must fail."""
    with pytest.raises(ClientError) as e:
        call()
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]


def log_text(gw):
    gw.log.flush()
    return open(gw.log.name).read()


def warn_lines(gw):
    return [l for l in log_text(gw).splitlines() if " WARN " in l and "authentication failed" in l]


def auth_failures(gw):
    with urllib.request.urlopen(gw.admin + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'^smbgate_s3_auth_failures_total\{reason="(\w+)"\} (\S+)$', text, re.M)}


def wait_for(pred, timeout=5):
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.05)
    return pred()


def test_each_failed_authentication_is_a_warn_line_and_a_count(agw):
    time.sleep(1.1)  # a fresh rate-limit window
    before = auth_failures(agw)
    cases = [
        ("bad_signature", ACCESS_KEY, "SignatureDoesNotMatch",
         lambda: client(agw, secret="not-the-secret").list_buckets()),
        ("unknown_key", "AKIDNOSUCHKEY", "InvalidAccessKeyId",
         lambda: client(agw, key="AKIDNOSUCHKEY").list_buckets()),
        ("wrong_region", ACCESS_KEY, "AuthorizationHeaderMalformed",
         lambda: client(agw, region="eu-west-1").list_buckets()),
    ]
    url = client(agw).generate_presigned_url("list_buckets", ExpiresIn=1)
    time.sleep(2)
    for reason, key, code, call in cases:
        got, rid = refused(call)
        assert got == code
        line = wait_for(lambda: [l for l in warn_lines(agw) if rid in l]) and \
            [l for l in warn_lines(agw) if rid in l][0]
        assert line, f"no WARN line for {reason} ({rid})"
        assert f"reason={reason}" in line and f"access_key={key}" in line and "client=127.0.0.1" in line, line
    # An expired presigned URL.
    try:
        urllib.request.urlopen(url, timeout=10)
        raise AssertionError("an expired URL was served")
    except urllib.error.HTTPError as e:
        assert e.code == 403
        rid = e.headers["x-amz-request-id"]
    assert wait_for(lambda: any(rid in l and "reason=expired" in l for l in warn_lines(agw)))
    after = auth_failures(agw)
    for reason in ("bad_signature", "unknown_key", "wrong_region", "expired"):
        assert after.get(reason, 0) - before.get(reason, 0) == 1, (reason, before, after)
    # Never a secret, and other client errors stay at DEBUG.
    assert "not-the-secret" not in log_text(agw) and SECRET_KEY not in log_text(agw)
    got, rid = refused(lambda: client(agw).head_bucket(Bucket="no-such-bucket-here"))
    time.sleep(0.3)
    assert rid not in log_text(agw)


def test_a_flood_is_rate_limited_and_what_was_left_out_is_counted(agw):
    time.sleep(1.1)
    bad = client(agw, secret="flood")
    n_before = len(warn_lines(agw))
    t0 = time.monotonic()
    # Ten at a time, so that even a slow machine sends more than ten a
    # second, the rate the log keeps.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(lambda _: refused(lambda: bad.list_buckets()), range(60)))
    took = time.monotonic() - t0
    time.sleep(1.1)
    refused(lambda: bad.list_buckets())  # the next window's first line
    lines = warn_lines(agw)[n_before:]
    windows = int(took) + 2
    assert len(lines) <= 10 * windows + 1, (len(lines), took)
    assert len(lines) < 61
    left_out = sum(int(m.group(1)) for l in lines for m in [re.search(r"not_logged_before=(\d+)", l)] if m)
    assert left_out == 61 - len(lines), (left_out, len(lines))
    assert auth_failures(agw).get("bad_signature", 0) >= 61


def test_a_refused_form_upload_names_the_forms_access_key(agw):
    """A POST Object form names its access key in the form, not in a header:
    the WARN line of its failed authentication names that key."""
    import requests
    time.sleep(1.1)  # a fresh rate-limit window
    s3 = client(agw)
    s3.create_bucket(Bucket="auth-log-forms")
    v4 = boto3.client("s3", endpoint_url=agw.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key="not-the-secret",
                      config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    stranger = boto3.client("s3", endpoint_url=agw.endpoint, region_name=REGION, aws_access_key_id="AKIDFORMSTRANGER",
                            aws_secret_access_key="x",
                            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    for reason, key, signer in (("bad_signature", ACCESS_KEY, v4), ("unknown_key", "AKIDFORMSTRANGER", stranger)):
        p = signer.generate_presigned_post("auth-log-forms", "k")
        r = requests.post(p["url"], data=p["fields"], files={"file": ("f", b"x")}, timeout=30)
        assert r.status_code == 403, r.text
        rid = r.headers["x-amz-request-id"]
        assert wait_for(lambda: [l for l in warn_lines(agw) if rid in l]), f"no WARN line for {reason}"
        line = [l for l in warn_lines(agw) if rid in l][0]
        assert f"reason={reason}" in line and f"access_key={key}" in line, line
    assert "not-the-secret" not in log_text(agw)


def test_a_grant_refusal_is_logged_as_an_authorization_refusal(own_samba, tmp_path):
    """Issue 43, item 6: a known user refused by its grant (a bucket its
    `buckets` do not name) signed correctly; the WARN line said
    "authentication failed", which sends an operator after the wrong key."""
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text('[users.reader]\naccess_key = "AKREADERGRANT"\nsecret_key = "reader-grant-secret"\n'
                   'buckets = ["mine"]\n')
    cfg.chmod(0o600)
    g = Gateway(own_samba, env={"SMBGATE_CONFIG": str(cfg)})
    try:
        g.client().create_bucket(Bucket="not-yours")
        got, rid = refused(lambda: client(g, key="AKREADERGRANT", secret="reader-grant-secret")
                           .list_objects_v2(Bucket="not-yours"))
        assert got == "AccessDenied"
        assert wait_for(lambda: any(rid in l for l in log_text(g).splitlines()))
        line = [l for l in log_text(g).splitlines() if rid in l][0]
        assert " WARN " in line and "authorization refused" in line and "authentication failed" not in line, line
        assert "reason=denied" in line and "access_key=AKREADERGRANT" in line, line
    finally:
        g.stop()
