"""A share root given as a DFS path (issue 21, part 2): smbd serves `share`
as a DFS namespace (msdfs root = yes) whose folder `link` is a link to the
folder `data` of a second share. A gateway whose --share is
smb://host/share/link serves the link's target: its buckets, its objects,
and what it writes lands there."""

import os
import uuid

import pytest

from conftest import Gateway, Samba


@pytest.fixture(scope="module")
def dfs_samba():
    s = Samba("--extra-share", "second", "--share-option", "msdfs root = yes")
    target = os.path.join(s.env["SMB_DIR"], "second", "data")
    os.makedirs(os.path.join(target, "photos"))
    with open(os.path.join(target, "photos", "cat.jpg"), "wb") as f:
        f.write(b"\xff\xd8 a cat")
    st = os.stat(os.path.join(s.env["SMB_DIR"], "second"))
    for p in (target, os.path.join(target, "photos"), os.path.join(target, "photos", "cat.jpg")):
        os.chown(p, st.st_uid, st.st_gid)
    os.symlink("msdfs:127.0.0.1\\second\\data", s.share_path / "link")
    yield s
    s.stop()


def test_a_bucket_root_that_is_a_dfs_link_serves_the_links_target(dfs_samba):
    env = {"SMBGATE_SHARE": f"smb://127.0.0.1:{dfs_samba.port}/share/link", "SMBGATE_LOG": "info"}
    g = Gateway(dfs_samba, env=env)
    try:
        s3 = g.client()
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos"]
        assert s3.get_object(Bucket="photos", Key="cat.jpg")["Body"].read() == b"\xff\xd8 a cat"
        key = f"dog-{uuid.uuid4().hex[:6]}.jpg"
        s3.put_object(Bucket="photos", Key=key, Body=b"a dog")
        target = os.path.join(dfs_samba.env["SMB_DIR"], "second", "data", "photos", key)
        assert open(target, "rb").read() == b"a dog"
        assert not (dfs_samba.share_path / "photos").exists()
        log = open(g.log.name).read()
        assert "the share root is a DFS link; serving its target" in log, log
        assert r"target=\\127.0.0.1\second\data" in log, log
    finally:
        g.stop()


def test_a_plain_folder_of_a_dfs_namespace_is_served_as_it_is(dfs_samba):
    (dfs_samba.share_path / "plain" / "docs").mkdir(parents=True, exist_ok=True)
    st = dfs_samba.share_path.stat()
    for p in (dfs_samba.share_path / "plain", dfs_samba.share_path / "plain" / "docs"):
        os.chown(p, st.st_uid, st.st_gid)
    g = Gateway(dfs_samba, env={"SMBGATE_SHARE": f"smb://127.0.0.1:{dfs_samba.port}/share/plain"})
    try:
        assert [b["Name"] for b in g.client().list_buckets()["Buckets"]] == ["docs"]
    finally:
        g.stop()
