"""SMB security defaults of the gateway: it signs every SMB request unless
told `--smb-sign=off`, and warns when the SMB password is on its command
line. What smbd saw is read from `smbstatus -b` (its Signing column: the
algorithm when every message is signed, "partial(...)" when only some are).
"""

import os
import subprocess
import time

import pytest

from conftest import Gateway, Samba


@pytest.fixture(scope="module")
def ssamba():
    s = Samba()
    yield s
    s.stop()


def session_signing(samba):
    """The Signing column of every SMB3 session smbd has, from smbstatus -b."""
    conf = os.path.join(samba.env["SMB_DIR"], "smb.conf")
    out = subprocess.run(["smbstatus", "-s", conf, "-b"], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if "SMB3_11" in line]


def wait_sessions(samba, n):
    deadline = time.monotonic() + 10
    while True:
        got = session_signing(samba)
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.mark.parametrize("flag,want", [(None, "AES-128-GMAC"), ("--smb-sign=off", "partial(AES-128-GMAC)")])
def test_the_gateway_signs_every_smb_message_unless_told_not_to(ssamba, flag, want):
    # Sessions of an earlier gateway must be gone first.
    deadline = time.monotonic() + 10
    while session_signing(ssamba) and time.monotonic() < deadline:
        time.sleep(0.1)
    gw = Gateway(ssamba, *([flag] if flag else []), env={"SMBGATE_POOL_SIZE": "2"})
    bucket = "signing-off" if flag else "signing-on"
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key="k", Body=b"signed")
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"signed"
        got = wait_sessions(ssamba, 2)
        assert got and set(got) == {want}, got
    finally:
        gw.stop()


def test_a_password_on_the_command_line_is_warned_about(ssamba):
    gw = Gateway(ssamba, "--smb-password", ssamba.env["SMB_PASSWORD"], env={"SMBGATE_SMB_PASSWORD": ""})
    try:
        assert gw.client().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
    finally:
        gw.stop()
    log = open(gw.log.name).read()
    assert "--smb-password on the command line is visible to every user of this machine" in log
    assert ssamba.env["SMB_PASSWORD"] not in log
