"""Issue 23, point 3: a directory larger than --list-window is listed in
windows of that many entries, never held whole, and the pages together are
exactly S3's listing."""

import os
import random
import uuid

from conftest import Gateway, put_on_share


def keys_of(pages):
    return [o["Key"] for p in pages for o in p.get("Contents", [])]


def prefixes_of(pages):
    return [c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]


def test_a_directory_larger_than_the_window_lists_whole_and_in_order(samba):
    # 300 files made on the share (in the server's order, not key order),
    # with subdirectories and a marker object among them, listed through a
    # window of 16 entries: pages end early where a window ends, and every
    # key comes exactly once, in order, for V2 and V1, with and without a
    # delimiter.
    g = Gateway(samba, "--list-window", "16")
    try:
        s3 = g.client()
        b = f"t-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=b)
        names = [f"f{i:04d}" for i in range(300)]
        random.Random(7).shuffle(names)
        big = samba.share_path / b / "big"
        big.mkdir()
        st = samba.share_path.stat()
        os.chown(big, st.st_uid, st.st_gid)
        for n in names:
            put_on_share(samba, f"{b}/big", n, n.encode())
        # Directories sort between files ("f0050-dir/" after "f0050"), one
        # with a marker object: a window must not end between the marker
        # and its directory, nor on a directory.
        inner = ["big/f0050-dir/k", "big/f0120-m/", "big/f0120-m/x", "big/f0200-dir/a/b"]
        inner += [f"big/f0201-d{i}/k" for i in range(20)]  # 20 directories in a row
        for k in inner:
            s3.put_object(Bucket=b, Key=k, Body=b"x")
        expected = sorted([f"big/{n}" for n in names] + inner, key=str.encode)

        pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket=b))
        assert keys_of(pages) == expected
        assert len(pages) > 1, "pages end where a window ends"
        assert all(p["IsTruncated"] for p in pages[:-1]) and not pages[-1]["IsTruncated"]
        small = s3.get_paginator("list_objects_v2").paginate(Bucket=b, PaginationConfig={"PageSize": 7})
        assert keys_of(small) == expected
        assert keys_of(s3.get_paginator("list_objects").paginate(Bucket=b)) == expected
        # Ten keys under a prefix, inside one window: one page.
        under = list(s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="big/f001"))
        assert keys_of(under) == [f"big/f001{i}" for i in range(10)]
        assert len(under) == 1 and under[0]["IsTruncated"] is False
        after = s3.list_objects_v2(Bucket=b, StartAfter="big/f0250", MaxKeys=3)
        assert [o["Key"] for o in after["Contents"]] == ["big/f0251", "big/f0252", "big/f0253"]

        rolled = list(s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="big/", Delimiter="/"))
        files = [k for k in expected if "/" not in k[len("big/") :]]
        dirs = sorted({k[: k.index("/", len("big/")) + 1] for k in expected if "/" in k[len("big/") :]})
        assert keys_of(rolled) == files
        assert prefixes_of(rolled) == dirs
        v1 = list(s3.get_paginator("list_objects").paginate(Bucket=b, Prefix="big/", Delimiter="/"))
        assert keys_of(v1) == files and prefixes_of(v1) == dirs
    finally:
        g.stop()


def test_a_directory_larger_than_the_window_is_read_once_per_listing(tmp_path):
    """Issue 42: what a window lets go is spilled to local disk in sorted
    runs, and the later windows are made from them: paging through 3,000
    files in windows of 200 reads the directory once, where without the
    spill (`--list-spill-size 0`) every window reads it again. Counted with
    smbd's own profiling counters (QUERY_DIRECTORY requests), which its
    processes publish a second after they change."""
    from conftest import Samba
    from smbd_profile import settled_count

    samba = Samba("--global-option", "smbd profiling level = count")

    def finds():
        return settled_count(samba, "smb2_find")

    try:
        big = samba.share_path / "spill" / "big"
        big.mkdir(parents=True)
        st = samba.share_path.stat()
        names = [f"f{i:05d}" for i in range(3000)]
        random.Random(3).shuffle(names)
        for n in names:
            fd = os.open(big / n, os.O_CREAT | os.O_WRONLY, 0o644)
            os.fchown(fd, st.st_uid, st.st_gid)
            os.close(fd)
        for d in (big, big.parent):
            os.chown(d, st.st_uid, st.st_gid)
        expected = [f"big/{n}" for n in sorted(names)]
        spent = {}
        for spill in ("1GiB", "0"):
            g = Gateway(samba, "--list-window", "200", "--list-spill-size", spill,
                        env={"TMPDIR": str(tmp_path)})
            try:
                s3 = g.client()
                before = finds()
                pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket="spill"))
                spent[spill] = finds() - before
                assert keys_of(pages) == expected, spill
                assert len(pages) >= 15, "pages end where a window ends"
            finally:
                g.stop()
        # One read of 3,000 names takes a few QUERY_DIRECTORY requests; the
        # windows of 200 without a spill take one read each, 15 or more.
        assert spent["1GiB"] * 5 <= spent["0"], spent
        assert list(tmp_path.iterdir()) == [], "spilled runs are unlinked as they are made"
    finally:
        samba.stop()
