"""Shares configured the way NAS appliances ship them (issue 12, point 4;
failure class 27).

- `vfs objects = catia fruit streams_xattr` (macOS-friendly shares, as many
  NAS ship): a representative part of the object suite runs on it:
  PUT/GET/HEAD with metadata, multipart, copy, listing, delete.
- `ea support = no`: smbgate cannot keep its metadata records, so it refuses
  to start with one line instead of failing every PUT with a 500 (the
  fallback to streams or sidecar records is not built yet).
"""

import hashlib
import os
import subprocess
import uuid

import pytest
from boto3.s3.transfer import TransferConfig

from conftest import ACCESS_KEY, SECRET_KEY, Gateway, Samba, _free_port, smbgate_bin

MIB = 1 << 20


@pytest.fixture(scope="module")
def fruit_gw():
    s = Samba("--share-option", "vfs objects = catia fruit streams_xattr")
    g = Gateway(s)
    yield g, s
    g.stop()
    s.stop()


def test_objects_on_a_fruit_share(fruit_gw):
    g, samba = fruit_gw
    s3 = g.client()
    bucket = f"fruit-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(300_000)
    r = s3.put_object(Bucket=bucket, Key="docs/a b.txt", Body=body, ContentType="text/plain",
                      Metadata={"owner": "ops"})
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    h = s3.head_object(Bucket=bucket, Key="docs/a b.txt")
    assert (h["ContentType"], h["Metadata"], h["ETag"]) == ("text/plain", {"owner": "ops"}, r["ETag"])
    assert s3.get_object(Bucket=bucket, Key="docs/a b.txt")["Body"].read() == body
    assert (samba.share_path / bucket / "docs" / "a b.txt").read_bytes() == body

    s3.copy_object(Bucket=bucket, Key="copy.txt", CopySource={"Bucket": bucket, "Key": "docs/a b.txt"})
    c = s3.head_object(Bucket=bucket, Key="copy.txt")
    assert (c["ETag"], c["Metadata"]) == (r["ETag"], {"owner": "ops"})

    big = os.urandom(12 * MIB)
    s3.upload_fileobj(__import__("io").BytesIO(big), bucket, "mp/big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB))
    m = s3.head_object(Bucket=bucket, Key="mp/big.bin")
    assert m["ETag"].endswith('-3"'), m["ETag"]
    assert s3.get_object(Bucket=bucket, Key="mp/big.bin")["Body"].read() == big

    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["copy.txt", "docs/a b.txt", "mp/big.bin"]
    d = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in d["CommonPrefixes"]] == ["docs/", "mp/"]
    for k in keys:
        s3.delete_object(Bucket=bucket, Key=k)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    s3.delete_bucket(Bucket=bucket)


def test_a_share_without_eas_is_refused_at_startup_in_one_line():
    s = Samba("--share-option", "ea support = no")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
        env.update({
            "SMBGATE_LISTEN": f"127.0.0.1:{_free_port()}",
            "SMBGATE_SHARE": f"smb://127.0.0.1:{s.port}/{s.env['SMB_SHARE']}",
            "SMBGATE_SMB_USER": s.env["SMB_USER"], "SMBGATE_SMB_PASSWORD": s.env["SMB_PASSWORD"],
            "SMBGATE_ACCESS_KEY": ACCESS_KEY, "SMBGATE_SECRET_KEY": SECRET_KEY,
        })
        r = subprocess.run([smbgate_bin(), "serve"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert lines == ["smbgate: the share does not store extended attributes (STATUS_EAS_NOT_SUPPORTED), "
                         "where smbgate keeps object metadata; enable them on the server (Samba: ea support = yes)"]
        assert list((s.share_path / ".smbgate" / "tmp").iterdir()) == [], "the probe leaves nothing behind"
    finally:
        s.stop()
