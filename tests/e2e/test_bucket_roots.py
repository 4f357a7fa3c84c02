"""Buckets from several shares (issue 12, point 1): besides the top-level
directories of --share, the config file's `[buckets.NAME]` tables name
buckets that are one directory each, here on a second Samba server. Each
is read and written there, its gateway state stays inside it and out of its
listings, and what cannot cross servers (a server-side copy) is refused."""

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from conftest import Gateway, Samba, smbgate_bin, write_secret
from s3util import expect_error


@pytest.fixture(scope="module")
def far():
    s = Samba("--user", "s3alice:alice-smb-pw")
    d = s.share_path / "far-dir"
    d.mkdir()
    st = s.share_path.stat()
    os.chown(d, st.st_uid, st.st_gid)
    d.chmod(0o2775)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def config(far, tmp_path_factory):
    d = tmp_path_factory.mktemp("roots")
    write_secret(d / "far.pw", far.env["SMB_PASSWORD"] + "\n")
    cfg = d / "smbgate.toml"
    cfg.write_text(f"""
[buckets.far]
share = "smb://127.0.0.1:{far.port}/share/far-dir"
smb_user = "{far.env['SMB_USER']}"
smb_password_file = "far.pw"
""")
    return cfg


@pytest.fixture(scope="module")
def gw(own_samba, config):
    g = Gateway(own_samba, env={"SMBGATE_CONFIG": str(config)})
    yield g
    g.stop()


def test_configured_buckets_are_listed_and_served_from_their_own_share(gw, own_samba, far):
    s3 = gw.client()
    s3.create_bucket(Bucket="local")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["far", "local"]
    s3.head_bucket(Bucket="far")
    body = os.urandom(3 << 20)
    r = s3.put_object(Bucket="far", Key="docs/report.bin", Body=body)
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    assert (far.share_path / "far-dir" / "docs" / "report.bin").read_bytes() == body
    assert not (own_samba.share_path / "far").exists()
    assert s3.get_object(Bucket="far", Key="docs/report.bin")["Body"].read() == body
    s3.put_object(Bucket="far", Key="top.txt", Body=b"top")
    # Its gateway state is inside it, and never listed.
    assert (far.share_path / "far-dir" / ".smbgate" / "tmp").is_dir()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="far")["Contents"]]
    assert keys == ["docs/report.bin", "top.txt"]
    delim = s3.list_objects_v2(Bucket="far", Delimiter="/")
    assert [p["Prefix"] for p in delim["CommonPrefixes"]] == ["docs/"]
    expect_error(400, "InvalidArgument", s3.put_object, Bucket="far", Key=".smbgate/x", Body=b"x")


def test_multipart_and_copies_within_a_configured_bucket(gw, far):
    s3 = gw.client()
    up = s3.create_multipart_upload(Bucket="far", Key="mp.bin")["UploadId"]
    parts = [os.urandom(5 << 20), os.urandom(1000)]
    etags = [s3.upload_part(Bucket="far", Key="mp.bin", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]
             for n, p in enumerate(parts)]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="far")["Uploads"]] == [up]
    s3.complete_multipart_upload(Bucket="far", Key="mp.bin", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    assert (far.share_path / "far-dir" / "mp.bin").read_bytes() == b"".join(parts)
    s3.copy_object(Bucket="far", Key="mp-copy.bin", CopySource={"Bucket": "far", "Key": "mp.bin"})
    assert (far.share_path / "far-dir" / "mp-copy.bin").read_bytes() == b"".join(parts)


def test_an_alias_of_the_state_directory_reaches_nothing(gw, far):
    """Issue 23, 6.9: in a bucket that is a share's directory, the
    gateway's state (`.smbgate`) sits beside the objects. Samba's default
    share resolves its 8.3 alias (`SMBGAT~X`), and no key under that alias
    lists, reads, deletes or writes anything there."""
    import re
    s3 = gw.client()
    up = s3.create_multipart_upload(Bucket="far", Key="pending.bin")["UploadId"]
    s3.upload_part(Bucket="far", Key="pending.bin", UploadId=up, PartNumber=1, Body=b"part")
    state = far.share_path / "far-dir" / ".smbgate"
    inside = sorted(str(p.relative_to(state)) for p in state.rglob("*") if p.is_file())
    assert inside, "the upload keeps its state there"
    alias = re.search(r"altname:\s*(\S+)", far.smbclient('allinfo "far-dir/.smbgate"')).group(1)
    assert alias.upper() == alias and "~" in alias, alias
    assert s3.list_objects_v2(Bucket="far", Prefix=f"{alias}/").get("Contents") is None
    assert not [o for o in s3.list_objects_v2(Bucket="far").get("Contents", []) if o["Key"].startswith(alias)]
    for name in inside:
        key = f"{alias}/" + name.replace(os.sep, "/")
        expect_error(404, "NoSuchKey", s3.get_object, Bucket="far", Key=key)
        s3.delete_object(Bucket="far", Key=key)
    try:
        s3.put_object(Bucket="far", Key=f"{alias}/planted", Body=b"x")
    except Exception as e:  # noqa: BLE001 (the S3 error is checked)
        assert e.response["Error"]["Code"] == "KeyConflict", e.response
    assert not (state / "planted").exists()
    assert sorted(str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()) == inside
    s3.abort_multipart_upload(Bucket="far", Key="pending.bin", UploadId=up)


def test_what_cannot_cross_shares_is_refused(gw, far, own_samba):
    s3 = gw.client()
    s3.create_bucket(Bucket="local2")
    s3.put_object(Bucket="local2", Key="here.txt", Body=b"here")
    s3.put_object(Bucket="far", Key="there.txt", Body=b"there")
    r = expect_error(501, "NotImplemented", s3.copy_object, Bucket="far", Key="copied.txt",
                     CopySource={"Bucket": "local2", "Key": "here.txt"})
    assert "different shares" in r["Error"]["Message"]
    expect_error(501, "NotImplemented", s3.copy_object, Bucket="local2", Key="copied.txt",
                 CopySource={"Bucket": "far", "Key": "there.txt"})
    up = s3.create_multipart_upload(Bucket="far", Key="pc.bin")["UploadId"]
    expect_error(501, "NotImplemented", s3.upload_part_copy, Bucket="far", Key="pc.bin", UploadId=up,
                 PartNumber=1, CopySource={"Bucket": "local2", "Key": "here.txt"})
    s3.abort_multipart_upload(Bucket="far", Key="pc.bin", UploadId=up)
    assert not (far.share_path / "far-dir" / "copied.txt").exists()
    assert not (own_samba.share_path / "local2" / "copied.txt").exists()
    # The operator's directory stays, whatever a client asks.
    r = expect_error(403, "AccessDenied", s3.delete_bucket, Bucket="far")
    assert "named in the gateway's configuration" in r["Error"]["Message"]
    assert (far.share_path / "far-dir").is_dir()
    # Creating it again is the us-east-1 no-op.
    s3.create_bucket(Bucket="far")


def test_a_configured_bucket_that_cannot_be_opened_is_one_line_at_startup(own_samba, far, tmp_path):
    cfg = write_secret(tmp_path / "smbgate.toml",
                       f'[buckets.gone]\nshare = "smb://127.0.0.1:{far.port}/share/no-such-dir"\n'
                       f'smb_user = "{far.env["SMB_USER"]}"\nsmb_password = "{far.env["SMB_PASSWORD"]}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    env.update(SMBGATE_CONFIG=str(cfg), SMBGATE_LISTEN="127.0.0.1:0", SMBGATE_ACCESS_KEY="AK",
               SMBGATE_SECRET_KEY="SK", SMBGATE_SHARE=f"smb://127.0.0.1:{own_samba.port}/share",
               SMBGATE_SMB_USER=own_samba.env["SMB_USER"], SMBGATE_SMB_PASSWORD=own_samba.env["SMB_PASSWORD"])
    r = subprocess.run([smbgate_bin(), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ['smbgate: bucket gone: share path "no-such-dir" does not exist'], r.stderr
    cfg.write_text('[buckets.Bad_Name]\nshare = "smb://127.0.0.1:1/share"\n')
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], env=env, capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.strip() == f"smbgate: config file {cfg}: [buckets.Bad_Name]: not a valid bucket name"
    cfg.write_text(f'[buckets.far]\nshare = "smb://127.0.0.1:{far.port}/share/far-dir"\n')
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"#   far: //127.0.0.1:{far.port}/share/far-dir, as SMB the gateway's own --smb-user" in r.stdout


def test_a_user_reaches_a_configured_bucket_as_its_own_account(own_samba, far, config, tmp_path):
    cfg = tmp_path / "smbgate.toml"
    write_secret(tmp_path / "far.pw", (config.parent / "far.pw").read_text())
    cfg.write_text(config.read_text() + """
[users.alice]
access_key = "AKALICEFAR"
secret_key = "alice-far-secret"
smb_user = "s3alice"
smb_password = "alice-smb-pw"
buckets = ["far"]
""")
    g = Gateway(own_samba, env={"SMBGATE_CONFIG": str(cfg)})
    try:
        import boto3
        from botocore.config import Config
        a = boto3.client("s3", endpoint_url=g.endpoint, region_name="us-east-1", aws_access_key_id="AKALICEFAR",
                         aws_secret_access_key="alice-far-secret",
                         config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        assert [b["Name"] for b in a.list_buckets()["Buckets"]] == ["far"]
        a.put_object(Bucket="far", Key="by-alice.txt", Body=b"alice on the far server")
        p = far.share_path / "far-dir" / "by-alice.txt"
        assert p.read_bytes() == b"alice on the far server"
        import pwd
        assert pwd.getpwuid(p.stat().st_uid).pw_name == "s3alice"
    finally:
        g.stop()


def test_a_users_credentials_go_only_to_servers_its_buckets_name(own_samba, far, config, tmp_path):
    """Issue 23, point 6.10: a user with `buckets = ["*"]` acting as its
    own SMB account must not send that account to every configured
    bucket's server. The far bucket, on another server, is 403 for it (and
    its WARN line says why); the user whose buckets name it reaches it."""
    cfg = tmp_path / "smbgate.toml"
    write_secret(tmp_path / "far.pw", (config.parent / "far.pw").read_text())
    cfg.write_text(config.read_text() + """
[users.wide]
access_key = "AKWIDEFAR"
secret_key = "wide-far-secret"
smb_user = "s3alice"
smb_password = "alice-smb-pw"
buckets = ["*"]

[users.named]
access_key = "AKNAMEDFAR"
secret_key = "named-far-secret"
smb_user = "s3alice"
smb_password = "alice-smb-pw"
buckets = ["far"]
""")
    g = Gateway(own_samba, env={"SMBGATE_CONFIG": str(cfg)})
    try:
        import boto3
        from botocore.config import Config

        def as_user(key, secret):
            return boto3.client("s3", endpoint_url=g.endpoint, region_name="us-east-1", aws_access_key_id=key,
                                aws_secret_access_key=secret,
                                config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        wide, named = as_user("AKWIDEFAR", "wide-far-secret"), as_user("AKNAMEDFAR", "named-far-secret")
        (far.share_path / "far-dir" / "seen.txt").write_bytes(b"far")
        assert named.get_object(Bucket="far", Key="seen.txt")["Body"].read() == b"far"
        expect_error(403, "AccessDenied", wide.get_object, Bucket="far", Key="seen.txt")
        expect_error(403, "AccessDenied", wide.put_object, Bucket="far", Key="w.txt", Body=b"x")
        assert not (far.share_path / "far-dir" / "w.txt").exists()
        assert "the user's buckets do not name it" in Path(g.log.name).read_text()
    finally:
        g.stop()


def test_anonymous_only_requests_reach_a_configured_bucket_on_its_own_share(own_samba, far, config):
    """Issue 23, point 6.7: with no S3 users (--anonymous alone), a
    configured bucket is still served from its own share (before, s3s ran
    no access check, so nothing said which root a request was for, and it
    went to --share)."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    from conftest import REGION
    g = Gateway(own_samba, "--anonymous",
                env={"SMBGATE_CONFIG": str(config), "SMBGATE_ACCESS_KEY": None, "SMBGATE_SECRET_KEY": None})
    try:
        s3 = boto3.client("s3", endpoint_url=g.endpoint, region_name=REGION,
                          config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                        retries={"total_max_attempts": 1}))
        s3.put_object(Bucket="far", Key="anon.txt", Body=b"far away")
        assert (far.share_path / "far-dir" / "anon.txt").read_bytes() == b"far away"
        assert not (own_samba.share_path / "far").exists()
        assert s3.get_object(Bucket="far", Key="anon.txt")["Body"].read() == b"far away"
    finally:
        g.stop()


def test_a_configured_bucket_inside_a_served_folder_is_refused(own_samba, tmp_path):
    """Issue 43, 5c: with `[buckets.alpha] path = "projects/alpha"`, the
    bucket `projects` listed alpha's objects and its `.smbgate` state
    (upload parts among them), readable and writable through it. Such a
    bucket is refused by `config check` and by `serve`, with one line."""
    cfg = write_secret(tmp_path / "smbgate.toml",
                       f'[buckets.alpha]\nshare = "smb://127.0.0.1:{own_samba.port}/share/projects/alpha"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    env.update(SMBGATE_CONFIG=str(cfg), SMBGATE_LISTEN="127.0.0.1:0", SMBGATE_ACCESS_KEY="AK",
               SMBGATE_SECRET_KEY="SK", SMBGATE_SHARE=f"smb://127.0.0.1:{own_samba.port}/share",
               SMBGATE_SMB_USER=own_samba.env["SMB_USER"], SMBGATE_SMB_PASSWORD=own_samba.env["SMB_PASSWORD"])
    want = (f'smbgate: config file {cfg}: [buckets.alpha]: its folder "projects/alpha" lies inside "projects", '
            'which is served as the bucket "projects": its objects and state would be keys of that bucket too; '
            'give a folder at the top of the share')
    for cmd in (["config", "check", str(cfg)], ["serve"]):
        r = subprocess.run([smbgate_bin(), *cmd], env=env, capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stderr.strip().splitlines()) == (1, [want]), (cmd, r.stdout, r.stderr)


def test_no_key_reaches_a_state_folder_at_any_depth(gw, own_samba):
    """Issue 43, 5c: a `.smbgate` component anywhere in a key is refused,
    so no bucket reaches the state of a folder below it that is (or was)
    served as a bucket of its own, and none is listed."""
    s3 = gw.client()
    s3.create_bucket(Bucket="outer")
    inner = own_samba.share_path / "outer" / "alpha" / ".smbgate" / "uploads" / "u1"
    inner.mkdir(parents=True)
    (inner / "part-00001").write_bytes(b"a part")
    st = own_samba.share_path.stat()
    for d in (inner, *inner.parents[:3]):
        os.chown(d, st.st_uid, st.st_gid)
    for key in ("alpha/.smbgate/uploads/u1/part-00001", "alpha/.smbgate", "a/b/.SMBGATE/x", ".smbgate"):
        expect_error(400, "InvalidArgument", s3.put_object, Bucket="outer", Key=key, Body=b"planted")
        # A key no object can have is simply not there for a read.
        expect_error(404, "NoSuchKey", s3.get_object, Bucket="outer", Key=key)
    assert (inner / "part-00001").read_bytes() == b"a part"
    s3.put_object(Bucket="outer", Key="alpha/seen.txt", Body=b"x")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="outer")["Contents"]] == ["alpha/seen.txt"]
    assert s3.list_objects_v2(Bucket="outer", Prefix="alpha/", Delimiter="/").get("CommonPrefixes") is None
