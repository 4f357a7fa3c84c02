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


def test_a_users_pool_never_follows_the_link_to_a_server_startup_did_not_name(tmp_path):
    """Issue 43, item 5: users' pools ask the link where it points when
    they connect; a link moved to a server nobody named at startup would
    have sent a user's SMB credentials there. Only the link's own server
    and the target startup followed are connected to for users' pools: a
    user still works there, and a move elsewhere is refused with a WARN."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
    from conftest import REGION, write_secret

    s = Samba("--extra-share", "second", "--extra-share", "third", "--share-option", "msdfs root = yes",
              "--user", "dfsann:ann-smb-pw", "--user", "dfsbob:bob-smb-pw")
    try:
        smb_dir = s.env["SMB_DIR"]
        st = os.stat(os.path.join(smb_dir, "second"))
        for share in ("second", "third"):
            data = os.path.join(smb_dir, share, "data")
            # third gets the gateway's own folders too, so that a pool that
            # followed the link there could write.
            for p in (data, os.path.join(data, "bkt"), os.path.join(data, ".smbgate"),
                      os.path.join(data, ".smbgate", "tmp"), os.path.join(data, ".smbgate", "uploads")):
                os.makedirs(p, exist_ok=True)
                os.chown(p, st.st_uid, st.st_gid)
                os.chmod(p, 0o2777)
        link = s.share_path / "link"
        os.symlink("msdfs:127.0.0.1\\second\\data", link)
        write_secret(tmp_path / "ann.pw", "ann-smb-pw\n")
        write_secret(tmp_path / "bob.pw", "bob-smb-pw\n")
        cfg = tmp_path / "smbgate.toml"
        cfg.write_text(
            '[users.ann]\naccess_key = "AKANN"\nsecret_key = "ann-s3-secret"\nsmb_user = "dfsann"\n'
            'smb_password_file = "ann.pw"\nbuckets = ["*"]\n'
            '[users.bob]\naccess_key = "AKBOB"\nsecret_key = "bob-s3-secret"\nsmb_user = "dfsbob"\n'
            'smb_password_file = "bob.pw"\nbuckets = ["*"]\n')
        g = Gateway(s, env={"SMBGATE_SHARE": f"smb://127.0.0.1:{s.port}/share/link", "SMBGATE_CONFIG": str(cfg),
                            "SMBGATE_LOG": "info"})
        client = lambda key, secret: boto3.client(
            "s3", endpoint_url=g.endpoint, region_name=REGION, aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        ann, bob = client("AKANN", "ann-s3-secret"), client("AKBOB", "bob-s3-secret")
        try:
            # The target startup followed: a user's pool connects there.
            bob.put_object(Bucket="bkt", Key="by-bob", Body=b"bob")
            assert open(os.path.join(smb_dir, "second", "data", "bkt", "by-bob"), "rb").read() == b"bob"
            # The link moves to a server nobody named (the same smbd by
            # another name); ann's account is then refused on the old
            # target, so her pool asks the link again.
            os.remove(link)
            os.symlink("msdfs:localhost\\third\\data", link)
            conf = os.path.join(smb_dir, "smb.conf")
            text = open(conf).read().replace("[second]\n", "[second]\n    invalid users = dfsann\n", 1)
            open(conf, "w").write(text)
            for _ in range(2):
                with pytest.raises(ClientError) as e:
                    ann.put_object(Bucket="bkt", Key="by-ann", Body=b"ann")
                assert e.value.response["Error"]["Code"] == "AccessDenied"
            assert not os.path.exists(os.path.join(smb_dir, "third", "data", "bkt", "by-ann"))
        finally:
            g.stop()
        log = open(g.log.name).read()
        warned = [l for l in log.splitlines() if "a server not named at startup" in l]
        assert len(warned) == 1 and "WARN" in warned[0] and "server=localhost" in warned[0] \
            and "user=dfsann" in warned[0], log
    finally:
        s.stop()
