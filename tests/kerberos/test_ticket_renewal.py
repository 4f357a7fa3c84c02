"""Tickets end; the gateway's sessions must not (issue 21). A Samba AD DC
ends an SMB session when its Kerberos service ticket ends, so a pool that
lives longer than its tickets has to log on again first. The gateway asks
for 4-minute tickets (the shortest this DC grants; its krb5.conf's
ticket_lifetime) and is used every 10 s for two and a half lifetimes: every
request must succeed, and the log must show the sessions renewed.
Run by scripts/kerberos-trial (about 10 minutes), not the default suite."""

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import Gateway, Samba  # noqa: E402 (the e2e helpers)
from test_kerberos import kerberos_env  # noqa: E402

LIFETIME_S = 240
RUN_S = int(os.environ.get("SMBGATE_KERBEROS_TRIAL_SECONDS", LIFETIME_S * 5 // 2))


@pytest.fixture(scope="module")
def dc():
    s = Samba("--ad", "--global-option", "ntlm auth = disabled")
    yield s
    s.stop()


def short_tickets(dc):
    """A krb5.conf for the DC's realm asking for tickets of LIFETIME_S."""
    conf = open(dc.env["SMB_KRB5_CONFIG"]).read().replace(
        "[libdefaults]\n", f"[libdefaults]\n\tticket_lifetime = {LIFETIME_S}s\n\trenew_lifetime = 0s\n", 1)
    path = f"{dc.env['SMB_DIR']}/short-tickets.conf"
    with open(path, "w") as f:
        f.write(conf)
    return path


@pytest.mark.parametrize("source", ["password", "keytab"])
def test_sessions_outlive_their_tickets(dc, source):
    env = dict(KRB5_CONFIG=short_tickets(dc), SMBGATE_SMB_KDC=None, SMBGATE_LOG="info")
    if source == "keytab":
        env.update(SMBGATE_SMB_PASSWORD=None, SMBGATE_SMB_KEYTAB=dc.env["SMB_KEYTAB"])
    g = Gateway(dc, env=kerberos_env(dc, **env))
    try:
        s3 = g.client()
        bucket = f"r-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=bucket)
        failures, n, start = [], 0, time.time()
        while time.time() - start < RUN_S:
            body = os.urandom(100_000)
            try:
                s3.put_object(Bucket=bucket, Key=f"k{n}", Body=body)
                assert s3.get_object(Bucket=bucket, Key=f"k{n}")["Body"].read() == body
            except Exception as e:  # every failure is reported, not just the first
                failures.append(f"{time.time() - start:.0f}s: {e}")
            n += 1
            time.sleep(10)
        log = open(g.log.name).read()
        assert failures == [], failures
        assert log.count("SMB session renewed before its Kerberos ticket ends") >= 4, log[-3000:]
    finally:
        g.stop()
