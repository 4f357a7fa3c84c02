"""The gateway logging on to its share with Kerberos (issue 21): a Samba AD
domain controller (scripts/samba-test-server start --ad, in a network
namespace of its own) whose file server refuses NTLM, so every request
below went through a Kerberos-keyed, signed SMB session."""

import subprocess
import uuid

import pytest

from conftest import ROOT, Gateway, Samba, parse_env_lines, write_secret

REALM = "SMBGATE.TEST"


@pytest.fixture(scope="module")
def dc():
    s = Samba("--ad", "--global-option", "ntlm auth = disabled", "--user", "bob:Bob-Secret-2")
    yield s
    s.stop()


def kerberos_env(dc, **more):
    """The gateway's settings for the DC: Kerberos only, the realm's KDC
    named (no krb5.conf of the system's), the share's service principal."""
    env = {
        "SMBGATE_SHARE": f"smb://{dc.env['SMB_HOST']}/{dc.env['SMB_SHARE']}",
        "SMBGATE_SMB_AUTH": "kerberos",
        "SMBGATE_SMB_REALM": REALM,
        "SMBGATE_SMB_KDC": dc.env["SMB_KDC"],
        "SMBGATE_SMB_SPN": dc.env["SMB_SPN"],
        "KRB5_CONFIG": "/nonexistent",  # the gateway's own --smb-kdc must win
    }
    env.update(more)
    return env


def smb_sessions(dc):
    """`smbstatus -b` on the DC: one line per SMB session, with its user."""
    # Inside the DC's namespaces: its winbindd (which names the users)
    # listens under DIR/run-samba, mounted over /run/samba there.
    d = dc.env["SMB_DIR"]
    r = subprocess.run(["ip", "netns", "exec", dc.env["SMB_NETNS"], "sh", "-c",
                        'mount --bind "$1/run-samba" /run/samba && exec smbstatus -s "$1/etc/smb.conf" -b', "sh", d],
                       capture_output=True, text=True)
    return r.stdout


def put_and_get(s3, key, body):
    """PUTs `body` as `key` of a new bucket and checks a GET returns it."""
    bucket = f"k-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body


def start_fails(dc, **env):
    """Runs a gateway that must refuse to start; returns its last log line."""
    with pytest.raises(RuntimeError) as e:
        Gateway(dc, env=kerberos_env(dc, **env))
    return str(e.value).removeprefix("smbgate exited: ").strip().splitlines()[-1]


def test_put_get_list_and_multipart_over_a_kerberos_session(dc):
    g = Gateway(dc, env=kerberos_env(dc))
    try:
        s3 = g.client()
        bucket = f"k-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=bucket)
        body = bytes(range(256)) * 4096
        s3.put_object(Bucket=bucket, Key="dir/one.bin", Body=body)
        assert s3.get_object(Bucket=bucket, Key="dir/one.bin")["Body"].read() == body
        assert (dc.share_path / bucket / "dir" / "one.bin").read_bytes() == body
        listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
        assert [(o["Key"], o["Size"]) for o in listed] == [("dir/one.bin", len(body))]
        up = s3.create_multipart_upload(Bucket=bucket, Key="big.bin")["UploadId"]
        parts = [bytes([i]) * (5 << 20) for i in range(2)] + [b"tail"]
        etags = [s3.upload_part(Bucket=bucket, Key="big.bin", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]
                 for n, p in enumerate(parts)]
        s3.complete_multipart_upload(
            Bucket=bucket, Key="big.bin", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
        got = s3.get_object(Bucket=bucket, Key="big.bin")
        assert got["Body"].read() == b"".join(parts)
        assert got["ETag"].endswith('-3"')
        assert f"SMBGATE\\{dc.env['SMB_USER']}" in smb_sessions(dc)
    finally:
        g.stop()


def test_a_keytab_logs_on_without_a_password(dc):
    g = Gateway(dc, env=kerberos_env(dc, SMBGATE_SMB_PASSWORD=None, SMBGATE_SMB_KEYTAB=dc.env["SMB_KEYTAB"]))
    try:
        put_and_get(g.client(), "k", b"from a keytab")
    finally:
        g.stop()


def test_a_wrong_password_is_one_line_naming_kerberos_and_no_ntlm_try(dc):
    line = start_fails(dc, SMBGATE_SMB_PASSWORD="not-Her-Password-1")
    assert "Kerberos logon" in line and "Preauthentication failed" in line, line
    assert "alice" in line and "not-Her-Password-1" not in line, line


def test_a_share_host_not_in_the_realm_is_named(dc):
    line = start_fails(dc, SMBGATE_SMB_SPN=None)
    # cifs/<the DC's address> is no principal of the realm.
    assert "Kerberos logon" in line and "not found in Kerberos database" in line, line


def test_kdc_without_a_realm_is_refused_at_startup(dc):
    line = start_fails(dc, SMBGATE_SMB_REALM=None)
    assert line == "smbgate: --smb-kdc needs --smb-realm (the realm those KDCs serve)", line


def test_ntlm_mode_is_refused_by_a_server_that_disabled_ntlm(dc):
    # The control: the same gateway without Kerberos cannot log on at all,
    # so the tests above did not pass on NTLM.
    line = start_fails(dc, SMBGATE_SMB_AUTH="ntlm")
    assert line == (f"smbgate: SMB server {dc.env['SMB_HOST']}:445 refuses NTLM logons: log on with Kerberos "
                    "(--smb-auth kerberos, with --smb-realm, or --smb-keytab, or a credential cache)"), line


def test_a_user_of_the_config_file_logs_on_with_its_own_keytab(dc, tmp_path):
    bob_keytab = f"{dc.env['SMB_DIR']}/bob.keytab"
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(f"""
[users.bob]
access_key = "AKIDBOB"
secret_key_file = "bob.secret"
smb_user = "bob"
smb_keytab = "{bob_keytab}"
buckets = ["*"]
""")
    write_secret(tmp_path / "bob.secret", "bob-s3-secret\n")
    cfg.chmod(0o600)
    g = Gateway(dc, "--config", str(cfg), env=kerberos_env(dc))
    try:
        put_and_get(g.client("AKIDBOB", "bob-s3-secret"), "b", b"bob's")
        assert "SMBGATE\\bob" in smb_sessions(dc)
    finally:
        g.stop()


def test_a_keytab_every_user_may_read_is_refused(dc, tmp_path):
    import shutil
    loose = tmp_path / "alice.keytab"
    shutil.copy(dc.env["SMB_KEYTAB"], loose)
    loose.chmod(0o644)
    line = start_fails(dc, SMBGATE_SMB_PASSWORD=None, SMBGATE_SMB_KEYTAB=str(loose))
    assert line == (f"smbgate: --smb-keytab {loose}: refused, since every user may read or change it "
                    "(mode 644) and the gateway runs as root; chmod o-rwx it"), line


def test_no_kdc_and_a_wrong_realm_are_named(dc):
    line = start_fails(dc, SMBGATE_SMB_KDC="127.0.0.1:9")
    assert "Kerberos logon" in line and "Cannot contact any KDC for realm 'SMBGATE.TEST'" in line, line
    line = start_fails(dc, SMBGATE_SMB_REALM="ELSEWHERE.TEST")
    assert "Kerberos logon" in line and "ELSEWHERE.TEST" in line, line


@pytest.fixture(scope="module")
def ntlm_dc():
    """A DC that still takes NTLM."""
    s = Samba("--ad")
    yield s
    s.stop()


def test_negotiate_falls_back_to_ntlm_once_warned_where_no_ticket_can_be_had(ntlm_dc):
    # A DC that still takes NTLM, a service principal the realm lacks, and
    # the fallback asked for (issue 43): every connection of the pool logs
    # on with NTLM, and the log says so once, not once per connection.
    env = kerberos_env(ntlm_dc, SMBGATE_SMB_AUTH="negotiate", SMBGATE_SMB_AUTH_FALLBACK="ntlm",
                       SMBGATE_SMB_SPN="cifs/nosuchhost.smbgate.test", SMBGATE_SMB_DOMAIN="SMBGATE",
                       SMBGATE_POOL_SIZE="4", SMBGATE_LOG="warn")
    g = Gateway(ntlm_dc, env=env)
    try:
        put_and_get(g.client(), "n", b"over NTLM")
    finally:
        g.stop()
    log = open(g.log.name).read()
    assert log.count("no Kerberos ticket; logging on with NTLM") == 1, log
    assert "not found in Kerberos database" in log, log


def test_negotiate_with_kerberos_settings_never_falls_back_to_ntlm_unasked(ntlm_dc):
    """Issue 43, item 5: with a Kerberos setting given, negotiate fell back
    to NTLM whenever no ticket could be had, so a mistyped principal (or a
    KDC an attacker keeps unreachable) sent NTLM logons where the operator
    set up Kerberos. Without --smb-auth-fallback ntlm it now fails as
    --smb-auth kerberos does, naming Kerberos, with no NTLM try."""
    env = kerberos_env(ntlm_dc, SMBGATE_SMB_AUTH="negotiate", SMBGATE_SMB_SPN="cifs/nosuchhost.smbgate.test",
                       SMBGATE_SMB_DOMAIN="SMBGATE", SMBGATE_LOG="warn")
    with pytest.raises(RuntimeError) as e:
        Gateway(ntlm_dc, env=env)
    out = str(e.value)
    line = out.removeprefix("smbgate exited: ").strip().splitlines()[-1]
    assert "Kerberos logon" in line and "not found in Kerberos database" in line, out
    assert "logging on with NTLM" not in out, out
    # The fallback belongs to negotiate: with kerberos it is refused.
    env.update(SMBGATE_SMB_AUTH="kerberos", SMBGATE_SMB_AUTH_FALLBACK="ntlm")
    with pytest.raises(RuntimeError) as e:
        Gateway(ntlm_dc, env=env)
    assert "--smb-auth-fallback ntlm needs --smb-auth negotiate" in str(e.value), str(e.value)
