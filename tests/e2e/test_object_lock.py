"""Object Lock (issue 39, point 2) against real Samba: the bucket's
configuration and AWS's refusals, lock headers on writes, retention and
legal holds on the latest version or a versionId, COMPLIANCE that only
lengthens, GOVERNANCE that yields only to a user allowed to bypass it, and
the lock holding on the share too: smbclient can neither delete nor
overwrite a locked object's file."""

import base64
import datetime
import hashlib
import re
import subprocess
import time
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway, Samba, write_secret
from s3util import raw

KEEPER = ("AKKEEPER000000000001", "keeper-secret-key-0001")
PLAIN = ("AKPLAIN0000000000002", "plain-secret-key-0002")


@pytest.fixture(scope="module")
def lgw(own_samba, tmp_path_factory):
    d = tmp_path_factory.mktemp("lock")
    cfg = d / "smbgate.toml"
    cfg.write_text(f"""
[users.keeper]
access_key = "{KEEPER[0]}"
secret_key = "{KEEPER[1]}"
buckets = ["*"]
bypass_governance = true

[users.plain]
access_key = "{PLAIN[0]}"
secret_key = "{PLAIN[1]}"
buckets = ["*"]
""")
    write_secret(cfg, cfg.read_text())
    g = Gateway(own_samba, env={"SMBGATE_CONFIG": str(cfg)})
    yield g
    g.stop()


def client(gw, key):
    return boto3.client("s3", endpoint_url=gw.endpoint, region_name=REGION,
                        aws_access_key_id=key[0], aws_secret_access_key=key[1],
                        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))


def err(e):
    return e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def later(days=1):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)


def attributes(samba, path):
    """The DOS attribute letters smbclient shows for `path` (R: read-only)."""
    out = samba.smbclient(f'allinfo "{path}"')
    return re.search(r"^attributes: (\S+)", out, re.M).group(1)


def md5(body):
    return base64.b64encode(hashlib.md5(body).digest()).decode()


@pytest.fixture
def locked(lgw):
    s3 = lgw.client()
    name = f"lock-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    return name


def test_a_locked_bucket_is_versioned_and_its_configuration_reads_back(lgw, locked):
    s3 = lgw.client()
    assert s3.get_bucket_versioning(Bucket=locked)["Status"] == "Enabled"
    assert s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"] == {"ObjectLockEnabled": "Enabled"}
    rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 3}}
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule})
    assert s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]["Rule"] == rule
    bad = [
        ({"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1, "Years": 1}}, ("MalformedXML", 400)),
        ({"DefaultRetention": {"Mode": "FOREVER", "Days": 1}}, ("MalformedXML", 400)),
        ({"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 0}}, ("InvalidArgument", 400)),
        ({"DefaultRetention": {"Mode": "COMPLIANCE", "Years": 10000}}, ("InvalidArgument", 400)),
    ]
    for rule, want in bad:
        with pytest.raises(ClientError) as e:
            s3.put_object_lock_configuration(Bucket=locked,
                                             ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule})
        assert err(e) == want, rule
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket=locked, VersioningConfiguration={"Status": "Suspended"})
    assert err(e) == ("InvalidBucketState", 409)
    plain = f"plain-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=plain)
    with pytest.raises(ClientError) as e:
        s3.get_object_lock_configuration(Bucket=plain)
    assert err(e) == ("ObjectLockConfigurationNotFoundError", 404)
    with pytest.raises(ClientError) as e:
        s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    assert err(e) == ("InvalidBucketState", 409)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=plain, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later())
    assert err(e) == ("InvalidRequest", 400)
    # An existing versioned bucket can take Object Lock.
    s3.put_bucket_versioning(Bucket=plain, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    assert s3.get_object_lock_configuration(Bucket=plain)["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"


def test_lock_headers_are_checked_and_need_a_digest(lgw, locked):
    s3 = lgw.client()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="COMPLIANCE")
    assert err(e) == ("InvalidArgument", 400)
    # A folder marker keeps one version: nothing could hold a lock on it.
    for body in (b"", b"with a body"):
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=locked, Key="folder/", Body=body, ContentMD5=md5(body), ObjectLockLegalHoldStatus="ON")
        assert err(e) == ("InvalidRequest", 400)
    past = later(-1)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=past)
    assert err(e) == ("InvalidArgument", 400)
    # Without Content-MD5 or a checksum header: refused, as on AWS.
    until = later().strftime("%Y-%m-%dT%H:%M:%SZ")
    body = b"no digest"
    req = AWSRequest(method="PUT", url=f"{lgw.endpoint}/{locked}/nd", data=body, headers={
        "x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": until,
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    st, _, answer = raw(lgw.endpoint, "PUT", f"/{locked}/nd", headers=dict(req.headers.items()), body=body)
    assert st == 400 and b"<Code>InvalidRequest</Code>" in answer and b"Content-MD5" in answer, (st, answer)


def test_compliance_only_lengthens_and_holds_against_deletes(lgw, locked, own_samba):
    s3 = lgw.client()
    until = later(1).replace(microsecond=0)
    r = s3.put_object(Bucket=locked, Key="backup/b1", Body=b"precious", ContentMD5=md5(b"precious"),
                      ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)
    v = r["VersionId"]
    # Marked read-only on the share as it is written.
    assert "R" in attributes(own_samba, f"{locked}/backup/b1")
    head = s3.head_object(Bucket=locked, Key="backup/b1")
    assert (head["ObjectLockMode"], head["ObjectLockRetainUntilDate"]) == ("COMPLIANCE", until)
    got = s3.get_object_retention(Bucket=locked, Key="backup/b1", VersionId=v)["Retention"]
    assert (got["Mode"], got["RetainUntilDate"]) == ("COMPLIANCE", until)
    for who in (lgw.client(), client(lgw, KEEPER)):
        with pytest.raises(ClientError) as e:
            who.delete_object(Bucket=locked, Key="backup/b1", VersionId=v, BypassGovernanceRetention=True)
        assert err(e) == ("AccessDenied", 403)
        with pytest.raises(ClientError) as e:
            who.put_object_retention(Bucket=locked, Key="backup/b1", VersionId=v, BypassGovernanceRetention=True,
                                     Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until - datetime.timedelta(hours=1)})
        assert err(e) == ("AccessDenied", 403)
        with pytest.raises(ClientError) as e:
            who.put_object_retention(Bucket=locked, Key="backup/b1", VersionId=v, BypassGovernanceRetention=True,
                                     Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(9)})
        assert err(e) == ("AccessDenied", 403)
    longer = later(2).replace(microsecond=0)
    s3.put_object_retention(Bucket=locked, Key="backup/b1", VersionId=v,
                            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": longer})
    assert s3.get_object_retention(Bucket=locked, Key="backup/b1")["Retention"]["RetainUntilDate"] == longer
    r = s3.delete_objects(Bucket=locked, Delete={"Objects": [{"Key": "backup/b1", "VersionId": v}]})
    assert [(x["Key"], x["Code"]) for x in r["Errors"]] == [("backup/b1", "AccessDenied")]
    # The lock holds on the share: neither smbclient's del nor its put
    # gets through, and the bytes stay.
    path = own_samba.share_path / locked / "backup" / "b1"
    out = own_samba.smbclient(f'del "{locked}/backup/b1"; put /etc/hostname "{locked}/backup/b1"', check=False)
    assert "NT_STATUS_CANNOT_DELETE" in out and "NT_STATUS_ACCESS_DENIED" in out, out
    assert path.read_bytes() == b"precious"
    # A DELETE without a version ID still adds a marker; the version stays,
    # locked, under the bucket's state.
    d = s3.delete_object(Bucket=locked, Key="backup/b1")
    assert d["DeleteMarker"] is True
    assert s3.get_object(Bucket=locked, Key="backup/b1", VersionId=v)["Body"].read() == b"precious"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=locked, Key="backup/b1", VersionId=v)
    assert err(e) == ("AccessDenied", 403)


PERSON = ("person", "person-smb-pw")


def as_person(samba, cmd):
    """smbclient commands run by another account of the share (a person
    with write access to the buckets' folders, not the gateway's)."""
    r = subprocess.run(["smbclient", f"//127.0.0.1/{samba.env['SMB_SHARE']}", "-p", str(samba.port), "-m", "SMB3",
                        "-U", f"{PERSON[0]}%{PERSON[1]}", "-c", cmd], capture_output=True, text=True)
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def acl_samba():
    """A share that keeps Windows ACLs (vfs_acl_xattr), with a second
    account that may write everything the gateway's may."""
    s = Samba("--user", f"{PERSON[0]}:{PERSON[1]}", "--share-option", "vfs objects = acl_xattr")
    yield s
    s.stop()


def test_a_lock_holds_against_other_accounts_on_a_share_that_keeps_acls(acl_samba, tmp_path):
    """The read-only mark alone yields to anyone who may write the file's
    attributes: another account clears it and deletes. The DENY the
    gateway puts on a locked version's DACL stops that, and the ACEs come
    off when the lock is lifted."""
    cfg = tmp_path / "smbgate.toml"
    write_secret(cfg, f"""
[users.keeper]
access_key = "{KEEPER[0]}"
secret_key = "{KEEPER[1]}"
buckets = ["*"]
bypass_governance = true
""")
    g = Gateway(acl_samba, env={"SMBGATE_CONFIG": str(cfg)})
    try:
        s3 = client(g, KEEPER)
        s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
        s3.put_object(Bucket="vault", Key="free", Body=b"free", ContentMD5=md5(b"free"))
        kept = s3.put_object(Bucket="vault", Key="kept", Body=b"precious", ContentMD5=md5(b"precious"),
                             ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=later(1))["VersionId"]
        v = s3.put_object(Bucket="vault", Key="gov", Body=b"governed", ContentMD5=md5(b"governed"),
                          ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later(1))["VersionId"]
        root = acl_samba.share_path / "vault"
        out = as_person(acl_samba, 'cd vault; setmode kept -r; setmode gov -r; put /etc/hostname kept; del kept; del gov')
        # smbclient tries each setmode twice, the same answer both times.
        assert set(out.splitlines()) == {
            "cli_setatr failed: NT_STATUS_ACCESS_DENIED",
            "NT_STATUS_ACCESS_DENIED opening remote file \\vault\\kept",
            "NT_STATUS_CANNOT_DELETE deleting remote file \\vault\\kept",
            "NT_STATUS_CANNOT_DELETE deleting remote file \\vault\\gov",
        }, out
        assert (root / "kept").read_bytes() == b"precious"
        assert (root / "gov").read_bytes() == b"governed"
        # A file the person put on the share, locked afterwards through S3:
        # its owner cannot lift the mark either.
        assert "NT_STATUS" not in as_person(acl_samba, 'cd vault; put /etc/hostname theirs')
        s3.put_object_retention(Bucket="vault", Key="theirs",
                                Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later(1)})
        out = as_person(acl_samba, 'cd vault; setmode theirs -r; del theirs')
        assert set(out.splitlines()) == {"cli_setatr failed: NT_STATUS_ACCESS_DENIED",
                                         "NT_STATUS_CANNOT_DELETE deleting remote file \\vault\\theirs"}, out
        assert (root / "theirs").read_bytes() == Path("/etc/hostname").read_bytes()
        # Such a file's lock is its record's: GOVERNANCE yields to a bypass,
        # and the version goes by its ID.
        assert "NT_STATUS" not in as_person(acl_samba, 'cd vault; put /etc/hostname placed')
        s3.put_object_retention(Bucket="vault", Key="placed",
                                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(1)})
        placed = s3.head_object(Bucket="vault", Key="placed")["VersionId"]
        s3.delete_object(Bucket="vault", Key="placed", VersionId=placed, BypassGovernanceRetention=True)
        assert not (root / "placed").exists()
        # An object without a lock is the person's to change, as before.
        out = as_person(acl_samba, 'cd vault; put /etc/hostname free')
        assert "NT_STATUS" not in out, out
        assert (root / "free").read_bytes() == Path("/etc/hostname").read_bytes()
        # GOVERNANCE lifted (by a user allowed to bypass it): the mark and
        # the ACEs go, and the person may write the file again.
        client(g, KEEPER).put_object_retention(Bucket="vault", Key="gov", VersionId=v,
                                               BypassGovernanceRetention=True, Retention={})
        out = as_person(acl_samba, 'cd vault; put /etc/hostname gov')
        assert "NT_STATUS" not in out, out
        assert (root / "gov").read_bytes() == Path("/etc/hostname").read_bytes()
        # The gateway's own account is not denied: a new version moves the
        # locked one aside, and a version no longer locked can go.
        s3.put_object(Bucket="vault", Key="kept", Body=b"newer", ContentMD5=md5(b"newer"))
        assert s3.get_object(Bucket="vault", Key="kept", VersionId=kept)["Body"].read() == b"precious"
        # A retention past by the gateway's clock leaves the mark and the
        # ACEs on the share until the version goes, which the gateway may.
        # (Locked just now: a date already past would have been refused.)
        brief_until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
        brief = s3.put_object(Bucket="vault", Key="brief", Body=b"b", ContentMD5=md5(b"b"),
                              ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=brief_until)["VersionId"]
        time.sleep(max(0.0, (brief_until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 1)
        assert "NT_STATUS_ACCESS_DENIED" in as_person(acl_samba, 'cd vault; setmode brief -r')
        s3.delete_object(Bucket="vault", Key="brief", VersionId=brief)
        assert not (root / "brief").exists()
    finally:
        g.stop()


def test_governance_yields_only_to_a_user_allowed_to_bypass_it(lgw, locked):
    s3 = lgw.client()
    v = s3.put_object(Bucket=locked, Key="g", Body=b"gov", ContentMD5=md5(b"gov"),
                      ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later())["VersionId"]
    for who, bypass in ((s3, True), (client(lgw, PLAIN), True), (client(lgw, KEEPER), False)):
        with pytest.raises(ClientError) as e:
            who.delete_object(Bucket=locked, Key="g", VersionId=v, BypassGovernanceRetention=bypass)
        assert err(e) == ("AccessDenied", 403)
    # Lengthening needs no bypass; shortening does.
    s3.put_object_retention(Bucket=locked, Key="g", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(5)})
    with pytest.raises(ClientError) as e:
        s3.put_object_retention(Bucket=locked, Key="g", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(2)})
    assert err(e) == ("AccessDenied", 403)
    keeper = client(lgw, KEEPER)
    keeper.put_object_retention(Bucket=locked, Key="g", BypassGovernanceRetention=True,
                                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(2)})
    keeper.delete_object(Bucket=locked, Key="g", VersionId=v, BypassGovernanceRetention=True)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=locked, Key="g", VersionId=v)
    assert err(e)[1] == 404


def test_legal_holds_and_default_retention(lgw, locked, own_samba):
    s3 = lgw.client()
    v = s3.put_object(Bucket=locked, Key="h", Body=b"held", ContentMD5=md5(b"held"),
                      ObjectLockLegalHoldStatus="ON")["VersionId"]
    assert s3.head_object(Bucket=locked, Key="h")["ObjectLockLegalHoldStatus"] == "ON"
    assert s3.get_object_legal_hold(Bucket=locked, Key="h")["LegalHold"]["Status"] == "ON"
    with pytest.raises(ClientError) as e:
        s3.get_object_retention(Bucket=locked, Key="h")
    assert err(e) == ("NoSuchObjectLockConfiguration", 404)
    with pytest.raises(ClientError) as e:
        client(lgw, KEEPER).delete_object(Bucket=locked, Key="h", VersionId=v, BypassGovernanceRetention=True)
    assert err(e) == ("AccessDenied", 403)
    s3.put_object_legal_hold(Bucket=locked, Key="h", VersionId=v, LegalHold={"Status": "OFF"})
    # Released, its file on the share is writable again, and it can go.
    assert "R" not in attributes(own_samba, f"{locked}/h")
    s3.delete_object(Bucket=locked, Key="h", VersionId=v)
    # A default retention applies to writes that name none.
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}})
    s3.put_object(Bucket=locked, Key="d", Body=b"defaulted", ContentMD5=md5(b"defaulted"))
    head = s3.head_object(Bucket=locked, Key="d")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    left = head["ObjectLockRetainUntilDate"] - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(hours=23) < left <= datetime.timedelta(days=1), left
    # Copies and multipart uploads take the bucket's default too, never
    # their source's settings.
    s3.copy_object(Bucket=locked, Key="d2", CopySource={"Bucket": locked, "Key": "d"})
    assert s3.head_object(Bucket=locked, Key="d2")["ObjectLockMode"] == "COMPLIANCE"
    up = s3.create_multipart_upload(Bucket=locked, Key="mp", ObjectLockLegalHoldStatus="ON")["UploadId"]
    p = s3.upload_part(Bucket=locked, Key="mp", UploadId=up, PartNumber=1, Body=b"part")
    s3.complete_multipart_upload(Bucket=locked, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]})
    head = s3.head_object(Bucket=locked, Key="mp")
    assert (head["ObjectLockLegalHoldStatus"], head["ObjectLockMode"]) == ("ON", "COMPLIANCE")


def test_retention_documents_without_the_s3_namespace_are_read(lgw, locked):
    s3 = lgw.client()
    v = s3.put_object(Bucket=locked, Key="ns", Body=b"n", ContentMD5=md5(b"n"))["VersionId"]
    until = later(3).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    for sub, doc in (("retention", f"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>{until}</RetainUntilDate></Retention>"),
                     ("legal-hold", "<LegalHold><Status>ON</Status></LegalHold>")):
        body = doc.encode()
        url = f"{lgw.endpoint}/{locked}/ns?{sub}&versionId={v}"
        req = AWSRequest(method="PUT", url=url, data=body, headers={
            "Content-MD5": md5(body), "x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
        st, _, answer = raw(lgw.endpoint, "PUT", f"/{locked}/ns?{sub}&versionId={v}",
                            headers=dict(req.headers.items()), body=body)
        assert st == 200, (sub, st, answer)
    head = s3.head_object(Bucket=locked, Key="ns", VersionId=v)
    assert (head["ObjectLockMode"], head["ObjectLockLegalHoldStatus"]) == ("GOVERNANCE", "ON")


def test_a_share_clock_off_from_the_gateways_is_warned_about(own_samba):
    """Retention is judged by the gateway's clock: a gateway two hours
    ahead of the share (libfaketime) says so at startup."""
    lib = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    g = Gateway(own_samba, env={"LD_PRELOAD": str(lib), "FAKETIME": "+2h", "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "clock differs" not in Path(g.log.name).read_text():
            time.sleep(0.2)
        log = Path(g.log.name).read_text()
        assert "the share's clock differs from the gateway's by more than a minute" in log, log
        assert "skew_seconds=-72" in log, log
    finally:
        g.stop()
    # In step with the share: no warning.
    g = Gateway(own_samba)
    try:
        time.sleep(1.5)
        assert "clock differs" not in Path(g.log.name).read_text()
    finally:
        g.stop()
