"""Folders people already have on a share (issue 25, point 1): ListBuckets
lists only what a client can address, under the name it can use (`Photos`
as `photos` on a case-insensitive share), startup names the folders no
bucket name reaches, and `[buckets.NAME] path = "FOLDER"` serves one of
them under a name of the operator's choice."""

import pytest

from conftest import Gateway, put_on_share

FOLDERS = {"Photos": b"holiday", "Team Photos": b"offsite", "x_y": b"underscore"}


@pytest.fixture(scope="module")
def folders(own_samba):
    for folder, data in FOLDERS.items():
        put_on_share(own_samba, folder, "readme.txt", data)
    return own_samba


def startup_notice(g):
    g.log.flush()
    return [l for l in open(g.log.name).read().splitlines() if "no bucket name can reach" in l]


def test_folders_are_listed_under_the_names_that_reach_them(folders):
    g = Gateway(folders, env={"SMBGATE_LOG": "info"})
    try:
        s3 = g.client()
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos"]
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="photos")["Contents"]] == ["readme.txt"]
        assert s3.get_object(Bucket="photos", Key="readme.txt")["Body"].read() == b"holiday"
        (line,) = startup_notice(g)
        assert "'Team Photos', 'x_y'" in line and "[buckets.NAME] path" in line, line
    finally:
        g.stop()


def test_a_folder_is_served_under_a_configured_name(folders, tmp_path):
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text('[buckets.team-photos]\npath = "Team Photos"\n')
    g = Gateway(folders, env={"SMBGATE_LOG": "info", "SMBGATE_CONFIG": str(cfg)})
    try:
        s3 = g.client()
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos", "team-photos"]
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="team-photos")["Contents"]] == ["readme.txt"]
        assert s3.get_object(Bucket="team-photos", Key="readme.txt")["Body"].read() == b"offsite"
        s3.put_object(Bucket="team-photos", Key="new/plan.txt", Body=b"plan")
        assert (folders.share_path / "Team Photos" / "new" / "plan.txt").read_bytes() == b"plan"
        assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="team-photos")["Contents"]) == [
            "new/plan.txt", "readme.txt"]
        # The notice names only what is still unreachable.
        (line,) = startup_notice(g)
        assert "'x_y'" in line and "Team Photos" not in line, line
    finally:
        g.stop()


@pytest.mark.parametrize("entry, says", [
    ('path = "Team Photos"\nshare = "smb://h/s"', "either share"),
    ('path = "../elsewhere"', "folder under the share's root"),
    ('path = "Team Photos"\nsmb_user = "x"', "reached as --smb-user"),
])
def test_a_bad_folder_entry_is_refused_at_startup(folders, tmp_path, entry, says):
    import subprocess
    from conftest import smbgate_bin
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(f"[buckets.team-photos]\n{entry}\n")
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "SMBGATE_SHARE": "smb://127.0.0.1/share",
                            "SMBGATE_ACCESS_KEY": "AKIDX", "SMBGATE_SECRET_KEY": "secretsecret"})
    assert r.returncode != 0 and says in r.stderr, r.stderr
