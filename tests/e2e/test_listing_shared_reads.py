"""Concurrent listings of one directory share one read of it, whatever
prefix each lists (issue 42, point 1): the read that follows one in
flight is for every need waiting, and a directory that fits one window
serves them all. Counted with smbd's own profiling counters (QUERY_DIRECTORY
requests it served), on a Samba of this test's own.

The gateway reaches smbd through a proxy that holds each QUERY_DIRECTORY
answer back, so that a read lasts longer than eight clients take to
arrive: the claim is about listings that overlap, and on a busy machine
clients started together may otherwise arrive one read apart."""

import os
import threading

import pytest

from conftest import Gateway, Samba
from resetproxy import ResetProxy
from smbd_profile import settled_count

FILES = 20_000
CLIENTS = 8
# Seconds each QUERY_DIRECTORY answer is held back: a read of this
# directory takes three, over a second in all.
FIND_DELAY = 0.4


@pytest.fixture
def profiled():
    samba = Samba("--global-option", "smbd profiling level = count")
    proxy = ResetProxy(samba.port)
    proxy.find_delay = FIND_DELAY
    gw = Gateway(samba, env={"SMBGATE_SHARE": f"smb://127.0.0.1:{proxy.port}/{samba.env['SMB_SHARE']}"})
    yield samba, gw
    gw.stop()
    proxy.stop()
    samba.stop()


def finds(samba):
    """QUERY_DIRECTORY requests smbd has served so far."""
    return settled_count(samba, "smb2_find")


def test_concurrent_listings_with_other_prefixes_share_a_read(profiled):
    samba, gw = profiled
    s3 = gw.client()
    s3.create_bucket(Bucket="shared")
    d = samba.share_path / "shared" / "big"
    d.mkdir()
    st = samba.share_path.stat()
    for i in range(FILES):
        p = d / f"p{i % CLIENTS}-{i:06d}"
        p.write_bytes(b"")
        os.chown(p, st.st_uid, st.st_gid)
    os.chown(d, st.st_uid, st.st_gid)

    def first_page(c, prefix, out):
        out.append(c.list_objects_v2(Bucket="shared", Prefix=prefix, MaxKeys=5)["Contents"][0]["Key"])

    # One listing alone: what one read of the directory costs.
    before = finds(samba)
    alone = []
    first_page(s3, "big/p0-", alone)
    after = finds(samba)
    one_read = after - before
    assert alone == ["big/p0-000000"] and one_read > 2, one_read

    clients = [gw.client() for _ in range(CLIENTS)]
    for c in clients:
        c.head_bucket(Bucket="shared")  # connected before the race
    after = finds(samba)
    start = threading.Barrier(CLIENTS)
    got = [[] for _ in range(CLIENTS)]

    def run(i):
        start.wait()
        first_page(clients[i], f"big/p{i}-", got[i])

    before = after
    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spent = finds(samba) - before
    assert [g[0] for g in got] == [f"big/p{i}-{i:06d}" for i in range(CLIENTS)]
    # The first read, then one for all who waited for it: at most two
    # reads' worth, where each listing reading alone would take eight.
    assert spent <= 2 * one_read + 2, (spent, one_read)
