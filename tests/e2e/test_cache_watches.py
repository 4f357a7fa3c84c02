"""The object cache hears of changes no lease reports (issue 40, point 2b):
each directory that holds cached objects is watched with CHANGE_NOTIFY, so
a file a program changes on the server's own disk, or one a person renames
over the object, is seen by the next request, not after --cache-max-age.
A server that refuses watches is named at startup and the age bound
holds. Each test runs on a Samba of its own, so that `smbstatus -L` shows
exactly its gateway's opens."""

import re
import time
import urllib.request

import pytest

from conftest import Gateway, Samba, _free_port, open_handles


@pytest.fixture
def samba():
    s = Samba()
    yield s
    s.stop()


def opens(samba, path):
    """`smbstatus -L` lines of opens of exactly `path` (share-relative, `/`)."""
    return [l for l in open_handles(samba, path) if l.split()[-6] == path]


def watched_dirs(gw):
    with urllib.request.urlopen(gw.admin + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return int(float(re.search(r"^smbgate_object_cache_watched_directories (\S+)$", text, re.M).group(1)))


def held_and_watched(samba, s3, bucket, key):
    """HEADs `key` until the cache holds it (a leased open) and its
    directory is watched (an open of the directory), then waits out the
    watch's first second (smbd's notifyd starts watching the disk a moment
    after the watch is answered, and the gateway expires the directory's
    entries once more after ARM_GRACE) and HEADs it again."""
    path = f"{bucket}/{key}"
    directory = path.rsplit("/", 1)[0]
    deadline = time.monotonic() + 10
    while not ([l for l in opens(samba, path) if "LEASE(" in l] and opens(samba, directory)):
        assert time.monotonic() < deadline, open_handles(samba, bucket)
        s3.head_object(Bucket=bucket, Key=key)
        time.sleep(0.05)
    time.sleep(1.5)
    s3.head_object(Bucket=bucket, Key=key)


@pytest.mark.parametrize("key", ["top.txt", "deep/er/k.txt"])
def test_a_change_on_the_servers_own_disk_is_seen_long_before_the_max_age(samba, key):
    gw = Gateway(samba)  # --cache-max-age 30s
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="disk")
        old = s3.put_object(Bucket="disk", Key=key, Body=b"before")["ETag"]
        held_and_watched(samba, s3, "disk", key)
        assert s3.get_object(Bucket="disk", Key=key)["Body"].read() == b"before"
        (samba.share_path / "disk" / key).write_bytes(b"after, and longer")
        # The watch's news takes some milliseconds (inotify, smbd's notifyd,
        # the CHANGE_NOTIFY answer); 5 s is far inside the 30 s the entry
        # would otherwise be kept (how long it takes is not asserted).
        changed = time.monotonic()
        while s3.get_object(Bucket="disk", Key=key)["Body"].read() == b"before":
            assert time.monotonic() - changed < 5, "still the old object: the watch did not tell"
            time.sleep(0.05)
        got = s3.get_object(Bucket="disk", Key=key)
        assert (got["Body"].read(), got["ContentLength"]) == (b"after, and longer", 17)
        assert got["ETag"] != old
        assert s3.head_object(Bucket="disk", Key=key)["ETag"] == got["ETag"]
    finally:
        gw.stop()


def test_a_file_renamed_over_the_object_on_the_share_is_seen_at_once(samba):
    gw = Gateway(samba)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="renamed")
        s3.put_object(Bucket="renamed", Key="obj.txt", Body=b"the object")
        held_and_watched(samba, s3, "renamed", "obj.txt")
        (samba.share_path / "renamed" / "other.txt").write_bytes(b"someone's file")
        samba.smbclient("cd renamed; rename other.txt obj.txt -f")
        time.sleep(0.2)
        assert s3.get_object(Bucket="renamed", Key="obj.txt")["Body"].read() == b"someone's file"
    finally:
        gw.stop()


def test_a_watch_ends_with_its_last_entry_and_keeps_no_directory_alive(samba):
    port = _free_port()
    gw = Gateway(samba, env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{port}"})
    gw.admin = f"http://127.0.0.1:{port}"
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="ends")
        s3.put_object(Bucket="ends", Key="d/only.txt", Body=b"x")
        held_and_watched(samba, s3, "ends", "d/only.txt")
        assert watched_dirs(gw) == 1
        # The delete empties the directory, which the gateway then removes.
        s3.delete_object(Bucket="ends", Key="d/only.txt")
        deadline = time.monotonic() + 5
        while opens(samba, "ends/d") or (samba.share_path / "ends" / "d").exists():
            assert time.monotonic() < deadline, (opens(samba, "ends/d"), (samba.share_path / "ends" / "d").exists())
            time.sleep(0.05)
        assert watched_dirs(gw) == 0
        s3.put_object(Bucket="ends", Key="d/again.txt", Body=b"y")
        assert s3.get_object(Bucket="ends", Key="d/again.txt")["Body"].read() == b"y"
    finally:
        gw.stop()


def test_a_server_that_refuses_watches_is_named_at_startup_and_the_age_bound_holds():
    samba = Samba("--global-option", "change notify = no")
    gw = Gateway(samba, "--cache-max-age", "2s", env={"SMBGATE_LOG": "warn"})
    try:
        s3 = gw.client()
        gw.log.flush()
        warned = [l for l in open(gw.log.name).read().splitlines() if "CHANGE_NOTIFY" in l]
        assert len(warned) == 1 and "WARN" in warned[0] and "STATUS_NOT_IMPLEMENTED" in warned[0], warned
        s3.create_bucket(Bucket="refused")
        s3.put_object(Bucket="refused", Key="k", Body=b"before")
        deadline = time.monotonic() + 10
        while not [l for l in opens(samba, "refused/k") if "LEASE(" in l]:
            assert time.monotonic() < deadline
            s3.head_object(Bucket="refused", Key="k")
            time.sleep(0.05)
        assert opens(samba, "refused") == [], "no watch is tried"
        (samba.share_path / "refused" / "k").write_bytes(b"after")
        changed = time.monotonic()
        while s3.get_object(Bucket="refused", Key="k")["Body"].read() != b"after":
            assert time.monotonic() - changed < 2.5, "still the old object past --cache-max-age"
            time.sleep(0.05)
        gw.log.flush()
        assert len([l for l in open(gw.log.name).read().splitlines() if "CHANGE_NOTIFY" in l]) == 1
    finally:
        gw.stop()
        samba.stop()
