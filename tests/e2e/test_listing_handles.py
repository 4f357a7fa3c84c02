"""Listings leave nothing open on the share (failure class 26).

A paged listing without a delimiter lists directories ahead of the walk;
when the page fills, those look-ahead listings are abandoned. Each must
close its directory handle: a handle left open makes the directory
DELETE_PENDING after `aws s3 rm`, so empty directories stayed behind as
CommonPrefixes and `aws s3 rb` failed with 500 InternalError.
"""

import time
import uuid

from conftest import open_handles


def wait_closed(samba, name, seconds=5.0):
    deadline = time.monotonic() + seconds
    while True:
        left = open_handles(samba, name)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_paged_listing_of_many_directories_leaves_no_handle_and_the_bucket_empties(gateway, samba, s3, tmp_path):
    name = f"lh-{uuid.uuid4().hex[:12]}"
    src = tmp_path / "tree"
    for d in range(100):
        (src / f"d{d:03}").mkdir(parents=True)
        for f in range(2):
            (src / f"d{d:03}" / f"f{f}").write_bytes(f"{d}-{f}".encode())
    gateway.aws("s3", "mb", f"s3://{name}")
    gateway.aws("s3", "sync", "--only-show-errors", str(src), f"s3://{name}/")

    # Small pages: each fills long before the look-ahead listings finish.
    for start in [None, "d010/", "d050/f0", "d097/f1"]:
        r = s3.list_objects_v2(Bucket=name, MaxKeys=3, **({"StartAfter": start} if start else {}))
        assert r["KeyCount"] == 3
        assert r["IsTruncated"] is True
    r = gateway.aws("s3api", "list-objects-v2", "--bucket", name, "--page-size", "7", "--max-items", "40")
    assert '"Key": "d019/f1"' in r.stdout
    assert wait_closed(samba, name) == []

    r = gateway.aws("s3", "rm", "--recursive", f"s3://{name}/")
    assert r.stdout.count("delete:") == 200
    assert s3.list_objects_v2(Bucket=name, Delimiter="/")["KeyCount"] == 0
    gateway.aws("s3", "rb", f"s3://{name}")
    assert not (samba.share_path / name).exists()
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
