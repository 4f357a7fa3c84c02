"""SMB security defaults of the gateway: it signs every SMB request unless
told `--smb-sign=off`, and warns when the SMB password is on its command
line. What smbd saw is read from `smbstatus -b` (its Signing column: the
algorithm when every message is signed, "partial(...)" when only some are).
"""

import os
import subprocess
import time

import pytest

from conftest import Gateway, Samba, smbgate_bin


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


def session_encryption(samba):
    """The Encryption column of every SMB3 session smbd has ("-" if none)."""
    conf = os.path.join(samba.env["SMB_DIR"], "smb.conf")
    out = subprocess.run(["smbstatus", "-s", conf, "-b"], capture_output=True, text=True, check=True).stdout
    return [line.split()[-2] for line in out.splitlines() if "SMB3_11" in line]


@pytest.fixture(scope="module")
def esamba():
    s = Samba("--encrypt", "auto")  # offers encryption, does not require it
    yield s
    s.stop()


@pytest.mark.parametrize("value", ["on", "true"])
def test_smb_encrypt_takes_on_like_smb_sign(esamba, value):
    deadline = time.monotonic() + 10
    while session_signing(esamba) and time.monotonic() < deadline:
        time.sleep(0.1)
    ssamba = esamba
    gw = Gateway(ssamba, env={"SMBGATE_POOL_SIZE": "2", "SMBGATE_SMB_ENCRYPT": value})
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket=f"enc-{value}")
        s3.put_object(Bucket=f"enc-{value}", Key="k", Body=b"sealed")
        assert s3.get_object(Bucket=f"enc-{value}", Key="k")["Body"].read() == b"sealed"
        wait_sessions(ssamba, 2)
        got = session_encryption(ssamba)
        assert len(got) == 2 and "-" not in got, got
    finally:
        gw.stop()


def test_a_bad_on_off_value_is_refused(ssamba):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    env["SMBGATE_SMB_ENCRYPT"] = "maybe"
    r = subprocess.run([smbgate_bin(), "serve", "--share", "smb://127.0.0.1:1/x"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and '"maybe" is not on or off' in r.stderr, r.stderr
