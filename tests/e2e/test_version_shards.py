"""A key's many versions split into shards (issue 39): past
`--versions-per-folder` stored versions and markers, a key's versions go
into subfolders of its versions folder, so that a case-insensitive share
does not read every older version before it makes each new one. The tests
run a gateway with 3 per folder, read the layout on the share itself, and
check that S3 sees one key's versions whichever folder holds them."""

import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway

PER_FOLDER = 3


@pytest.fixture
def small_folders(samba):
    g = Gateway(samba, env={"SMBGATE_VERSIONS_PER_FOLDER": str(PER_FOLDER)})
    yield g
    g.stop()


def layout(samba, bucket, key):
    """(files in the key's versions folder, {shard: files in it}), by name."""
    top = samba.share_path / ".smbgate" / "versions" / bucket / key / ".smbgate"
    if not top.exists():
        return None
    files = sorted(p.name for p in top.iterdir() if p.is_file())
    shards = {d.name: sorted(p.name for p in d.iterdir()) for d in top.iterdir() if d.is_dir()}
    return files, shards


def test_many_versions_fill_shards_and_read_back_as_one_key(samba, small_folders):
    s3 = small_folders.client()
    b = f"v-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    ids = [s3.put_object(Bucket=b, Key="dir/k", Body=b"v%d" % n)["VersionId"] for n in range(10)]
    marker = s3.delete_object(Bucket=b, Key="dir/k")["VersionId"]

    # Nine versions kept by overwrites, the tenth by the DELETE, and its
    # marker: the folder's three, then shards of three, three and two.
    files, shards = layout(samba, b, "dir/k")
    assert len(files) == PER_FOLDER, files
    assert sorted(len(f) for f in shards.values()) == [2, 3, 3], shards
    everything = files + [n for f in shards.values() for n in f]
    assert sorted(n.split(".")[1] for n in everything) == sorted(ids + [marker])
    # The shard begun last (the first by name) holds the newest two.
    newest = shards[min(shards)]
    assert [n.split(".", 1)[1] for n in newest] == [f"{marker}.marker", ids[9]], shards

    r = s3.list_object_versions(Bucket=b)
    assert [m["VersionId"] for m in r["DeleteMarkers"]] == [marker]
    assert r["DeleteMarkers"][0]["IsLatest"] is True
    assert [v["VersionId"] for v in r["Versions"]] == ids[::-1]
    assert not any(v["IsLatest"] for v in r["Versions"])
    for n, vid in enumerate(ids):
        got = s3.get_object(Bucket=b, Key="dir/k", VersionId=vid)
        assert (got["Body"].read(), got["VersionId"]) == (b"v%d" % n, vid)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="dir/k", VersionId=marker)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 405

    # A page boundary inside a shard.
    first = s3.list_object_versions(Bucket=b, MaxKeys=4)
    rest = s3.list_object_versions(Bucket=b, KeyMarker=first["NextKeyMarker"],
                                   VersionIdMarker=first["NextVersionIdMarker"])
    paged = [m["VersionId"] for m in first.get("DeleteMarkers", [])] + [v["VersionId"] for v in first["Versions"]]
    paged += [v["VersionId"] for v in rest["Versions"]]
    assert paged == [marker] + ids[::-1]


def test_a_new_instance_fills_the_newest_shard_before_it_begins_another(samba):
    b = f"v-{uuid.uuid4().hex[:12]}"
    g = Gateway(samba, env={"SMBGATE_VERSIONS_PER_FOLDER": str(PER_FOLDER)})
    try:
        s3 = g.client()
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        ids = [s3.put_object(Bucket=b, Key="k", Body=b"%d" % n)["VersionId"] for n in range(5)]
    finally:
        g.stop()
    files, shards = layout(samba, b, "k")
    assert (len(files), [len(f) for f in shards.values()]) == (3, [1]), (files, shards)
    g = Gateway(samba, env={"SMBGATE_VERSIONS_PER_FOLDER": str(PER_FOLDER)})
    try:
        s3 = g.client()
        ids += [s3.put_object(Bucket=b, Key="k", Body=b"%d" % n)["VersionId"] for n in range(5, 9)]
        files, after = layout(samba, b, "k")
        # The shard that held one is filled first, then one more begun.
        (shard,) = shards
        assert len(after[shard]) == 3 and sorted(len(f) for f in after.values()) == [2, 3], after
        assert [v["VersionId"] for v in s3.list_object_versions(Bucket=b)["Versions"]] == ids[::-1]

        # Deleting every version empties the shards, and they go with them:
        # the bucket can then be deleted.
        for vid in ids:
            s3.delete_object(Bucket=b, Key="k", VersionId=vid)
        assert layout(samba, b, "k") is None, layout(samba, b, "k")
        assert "Versions" not in s3.list_object_versions(Bucket=b)
        s3.delete_bucket(Bucket=b)
    finally:
        g.stop()


def test_a_suspended_bucket_drops_a_null_version_kept_in_a_shard(samba, small_folders):
    s3 = small_folders.client()
    b = f"v-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=b)

    def state(status):
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": status})

    state("Enabled")
    ids = [s3.put_object(Bucket=b, Key="k", Body=b"%d" % n)["VersionId"] for n in range(4)]
    state("Suspended")
    s3.put_object(Bucket=b, Key="k", Body=b"null one")  # v3 begins a shard
    state("Enabled")
    ids.append(s3.put_object(Bucket=b, Key="k", Body=b"4")["VersionId"])  # the null one joins it
    files, shards = layout(samba, b, "k")
    assert len(files) == 3 and [len(f) for f in shards.values()] == [2], (files, shards)
    assert any(n.endswith(".null") for n in next(iter(shards.values()))), shards
    state("Suspended")
    s3.put_object(Bucket=b, Key="k", Body=b"null two")  # the null one in the shard goes
    r = s3.list_object_versions(Bucket=b)
    assert [v["VersionId"] for v in r["Versions"]] == ["null"] + ids[::-1], r["Versions"]
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"null two"
    assert s3.get_object(Bucket=b, Key="k", VersionId=ids[3])["Body"].read() == b"3"
    for v in r["Versions"]:
        s3.delete_object(Bucket=b, Key="k", VersionId=v["VersionId"])
    assert layout(samba, b, "k") is None, layout(samba, b, "k")
    s3.delete_bucket(Bucket=b)


def test_two_instances_filling_shards_of_one_key_keep_one_order(samba):
    """Each instance counts only what it puts in a shard, so two writing
    one key fill shards of their own; a key's versions are read from all
    of them together, newest first, through either instance."""
    env = {"SMBGATE_VERSIONS_PER_FOLDER": str(PER_FOLDER)}
    a, b = Gateway(samba, env=env), Gateway(samba, env=env)
    try:
        s3a, s3b = a.client(), b.client()
        name = f"v-{uuid.uuid4().hex[:12]}"
        s3a.create_bucket(Bucket=name)
        s3a.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        ids = [(s3a, s3b)[n % 2].put_object(Bucket=name, Key="k", Body=b"%d" % n)["VersionId"] for n in range(16)]
        files, shards = layout(samba, name, "k")
        assert len(files) + sum(len(f) for f in shards.values()) == 15, (files, shards)
        assert all(len(f) <= PER_FOLDER for f in shards.values()), shards
        for s3 in (s3a, s3b):
            assert [v["VersionId"] for v in s3.list_object_versions(Bucket=name)["Versions"]] == ids[::-1]
            assert s3.get_object(Bucket=name, Key="k", VersionId=ids[7])["Body"].read() == b"7"
    finally:
        a.stop()
        b.stop()
