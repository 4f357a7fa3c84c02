"""What backup software asks of an immutable S3 target (issue 39, points
3 and 4), against real Samba: a backup tool's flow on a locked bucket from
end to end, rclone reading versions (`--s3-versions`, `--s3-version-at`),
and Veeam's Smart Object Storage API objects (`--veeam-sosapi`)."""

import base64
import datetime
import hashlib
import json
import os
import time
import uuid
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway
from test_cli import _rclone

FOLDER = ".system-d26a9498-cb7c-4a87-a44a-8ae204f5ba6c"


def md5(body):
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def err(e):
    return e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_backup_tools_flow_on_a_locked_bucket(s3):
    bucket = f"backups-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    until = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=7)).replace(microsecond=0)
    chunks = {f"chunks/{i:04d}": os.urandom(64 * 1024) for i in range(5)}
    ids = {}
    for key, body in chunks.items():
        r = s3.put_object(Bucket=bucket, Key=key, Body=body, ContentMD5=md5(body),
                          ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)
        ids[key] = r["VersionId"]
    # The next run extends the retention of what it still needs.
    longer = until + datetime.timedelta(days=7)
    for key, v in ids.items():
        s3.put_object_retention(Bucket=bucket, Key=key, VersionId=v,
                                Retention={"Mode": "COMPLIANCE", "RetainUntilDate": longer})
    # A ransomware-like client deletes everything it sees: markers only.
    for key in chunks:
        assert s3.delete_object(Bucket=bucket, Key=key)["DeleteMarker"] is True
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    listed = s3.list_object_versions(Bucket=bucket)
    assert sorted((v["Key"], v["VersionId"]) for v in listed["Versions"]) == sorted(ids.items())
    assert len(listed["DeleteMarkers"]) == 5 and all(m["IsLatest"] for m in listed["DeleteMarkers"])
    # ... and tries harder: shorter, removed, deleted by version ID.
    key, v = next(iter(ids.items()))
    for attempt in (
        lambda: s3.put_object_retention(Bucket=bucket, Key=key, VersionId=v,
                                        Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until}),
        lambda: s3.put_object_retention(Bucket=bucket, Key=key, VersionId=v, Retention={},
                                        BypassGovernanceRetention=True),
        lambda: s3.delete_object(Bucket=bucket, Key=key, VersionId=v, BypassGovernanceRetention=True),
    ):
        with pytest.raises(ClientError) as e:
            attempt()
        assert err(e) == ("AccessDenied", 403)
    # Restore: every chunk copied back from its version, byte for byte.
    for key, v in ids.items():
        s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key, "VersionId": v})
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == chunks[key]


def test_rclone_lists_and_reads_versions(gateway, s3):
    bucket = f"rcv-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="doc.txt", Body=b"first draft")
    time.sleep(1.5)
    between = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(1.5)
    s3.put_object(Bucket=bucket, Key="doc.txt", Body=b"final text")
    r = _rclone(gateway, "lsjson", "--s3-versions", f"gw:{bucket}")
    assert r.returncode == 0, r.stderr
    names = sorted(e["Path"] for e in json.loads(r.stdout))
    assert len(names) == 2 and "doc.txt" in names, names
    older = [n for n in names if n != "doc.txt"][0]
    assert older.startswith("doc-v") and older.endswith(".txt"), older
    r = _rclone(gateway, "cat", "--s3-versions", f"gw:{bucket}/{older}")
    assert (r.returncode, r.stdout) == (0, "first draft"), r.stderr
    r = _rclone(gateway, "cat", "--s3-version-at", between, f"gw:{bucket}/doc.txt")
    assert (r.returncode, r.stdout) == (0, "first draft"), r.stderr
    r = _rclone(gateway, "cat", f"gw:{bucket}/doc.txt")
    assert (r.returncode, r.stdout) == (0, "final text"), r.stderr


@pytest.fixture(scope="module")
def veeam(own_samba):
    g = Gateway(own_samba, env={"SMBGATE_VEEAM_SOSAPI": "on"})
    yield g
    g.stop()


def test_veeam_reads_the_system_and_capacity_objects(veeam, own_samba):
    s3 = veeam.client()
    bucket = f"veeam-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    system = s3.get_object(Bucket=bucket, Key=f"{FOLDER}/system.xml")
    assert system["ContentType"] == "application/xml"
    doc = ET.fromstring(system["Body"].read())
    assert doc.tag == "SystemInfo" and doc.findtext("ProtocolVersion") == '"1.0"'
    assert doc.findtext("ProtocolCapabilities/CapacityInfo") == "true"
    assert doc.findtext("SystemRecommendations/KbBlockSize") == "4096"
    body = s3.get_object(Bucket=bucket, Key=f"{FOLDER}/capacity.xml")["Body"].read()
    cap = ET.fromstring(body)
    total, available, used = (int(cap.findtext(n)) for n in ("Capacity", "Available", "Used"))
    st = os.statvfs(own_samba.share_path)
    assert total == st.f_blocks * st.f_frsize, (total, st)
    assert abs(available - st.f_bavail * st.f_frsize) < 256 << 20, (available, st)
    assert used == total - available
    head = s3.head_object(Bucket=bucket, Key=f"{FOLDER}/capacity.xml")
    assert head["ContentLength"] > 0 and head["ETag"].strip('"') != ""
    # Virtual: nothing is on the share, nothing is listed.
    assert not (own_samba.share_path / bucket / FOLDER).exists()
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=f"nope-{uuid.uuid4().hex[:8]}", Key=f"{FOLDER}/capacity.xml")
    assert err(e) == ("NoSuchBucket", 404)


def test_without_the_flag_they_are_ordinary_keys(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key=f"{FOLDER}/capacity.xml")
    assert err(e) == ("NoSuchKey", 404)
