"""The read-ahead budget (issue 4, split streaming): all GETs together hold at
most SMBGATE_READ_AHEAD_BUDGET bytes read ahead of their clients, plus a small
floor per GET. Segments that cannot be fetched ahead are read from the GET's
own handle when their turn comes, so the bytes are the same either way, and
clients that stop reading do not make the gateway buffer their objects."""

import hashlib
import os
import random
import socket
import subprocess
import time
import urllib.parse

import pytest

from conftest import Gateway, open_handles, put_on_share
from resetproxy import ResetProxy

MIB = 1 << 20


@pytest.fixture(scope="module")
def rsamba(own_samba):
    return own_samba


def gateway(samba, budget, prefetch="4"):
    return Gateway(samba, env={"SMBGATE_SEGMENT_SIZE": str(MIB), "SMBGATE_PREFETCH": prefetch,
                               "SMBGATE_READ_AHEAD_BUDGET": str(budget)})


@pytest.fixture(scope="module")
def big(rsamba):
    """A 64 MiB file put on the share directly (bucket `readahead`)."""
    d = rsamba.share_path / "readahead"
    d.mkdir(exist_ok=True)
    data = random.Random(64).randbytes(64 * MIB)
    (d / "big.bin").write_bytes(data)
    return data


@pytest.mark.parametrize("prefetch", ["4", "auto"])
@pytest.mark.parametrize("budget", [0, 3 * MIB, 512 * MIB], ids=["none", "three-segments", "default"])
def test_bytes_are_the_same_whatever_the_budget(rsamba, big, budget, prefetch):
    # With a fixed window and with the adaptive one (which grows and
    # shrinks between segments).
    gw = gateway(rsamba, budget, prefetch)
    try:
        s3 = gw.client()
        got = s3.get_object(Bucket="readahead", Key="big.bin")["Body"].read()
        assert len(got) == len(big)
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(big).hexdigest()
        # A range that starts and ends inside segments.
        lo, hi = 5 * MIB + 123, 41 * MIB + 4567
        part = s3.get_object(Bucket="readahead", Key="big.bin", Range=f"bytes={lo}-{hi}")["Body"].read()
        assert part == big[lo:hi + 1]
    finally:
        gw.stop()


def raw_get(gw, s3, key, extra_headers="", rcvbuf=None, timeout=30):
    """Sends a presigned GET of `readahead/key` on a socket of its own and
    returns the socket, before reading anything."""
    u = urllib.parse.urlsplit(s3.generate_presigned_url(
        "get_object", Params={"Bucket": "readahead", "Key": key}, ExpiresIn=600))
    c = socket.create_connection(("127.0.0.1", gw.port), timeout=timeout)
    if rcvbuf:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    c.sendall(f"GET {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\n{extra_headers}\r\n".encode())
    return c


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def test_stalled_clients_do_not_make_the_gateway_buffer_their_objects(rsamba, big):
    gw = gateway(rsamba, 16 * MIB)
    socks = []
    try:
        s3 = gw.client(signature_version="s3v4")
        # Warm up (pool connections, receive buffers) before the baseline.
        s3.get_object(Bucket="readahead", Key="big.bin")["Body"].read()
        base = rss_mib(gw.proc.pid)
        n = 24
        for _ in range(n):
            c = raw_get(gw, s3, "big.bin", rcvbuf=65536, timeout=10)
            head = c.recv(2000)
            assert head.startswith(b"HTTP/1.1 200"), head
            socks.append(c)
        # Give the gateway time to read ahead as far as it will.
        peak = 0
        for _ in range(10):
            time.sleep(0.3)
            peak = max(peak, rss_mib(gw.proc.pid))
        # Unbounded, each GET would buffer most of its 64 MiB object (about
        # 1.5 GiB here); bounded, it is the 16 MiB budget plus a few MiB per
        # GET, plus buffers kept for reuse.
        assert peak - base < 400, f"RSS grew by {peak - base} MiB with {n} stalled 64 MiB GETs"
        # And the budget comes back: a fresh GET gets the whole object.
        for c in socks:
            c.close()
        socks = []
        time.sleep(0.5)
        assert s3.get_object(Bucket="readahead", Key="big.bin")["Body"].read() == big
    finally:
        for c in socks:
            c.close()
        gw.stop()


def test_put_over_a_key_while_a_paused_get_streams_it(rsamba):
    # Samba refuses to rename over a file that is open, so a GET must not
    # keep the object open while its client is slow: past the first segment
    # it holds no handle between fetches, the overwrite goes through, and the
    # paused reader gets a prefix of the old version (whole, or cut short
    # when the next segment sees the new one), never a mix.
    old = random.Random(24).randbytes(24 * MIB)
    put_on_share(rsamba, "readahead", "busy.bin", old)
    gw = gateway(rsamba, 512 * MIB)
    try:
        s3 = gw.client(signature_version="s3v4")
        c = raw_get(gw, s3, "busy.bin", extra_headers="Connection: close\r\n")
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 4 * MIB:
            chunk = c.recv(1 << 20)
            assert chunk, "GET ended early"
            got += chunk
        head, body = got.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        time.sleep(0.5)  # paused, 4 MiB in
        new = b"the new version\n" * 1000
        r = s3.put_object(Bucket="readahead", Key="busy.bin", Body=new)
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        body += read_to_end(c)
        c.close()
        assert body == old[:len(body)], "the paused GET returned bytes that are not the old version"
        assert s3.get_object(Bucket="readahead", Key="busy.bin")["Body"].read() == new
    finally:
        gw.stop()


def read_to_end(c):
    """Reads a raw HTTP/1.1 response to the end (or a reset); returns its bytes."""
    got = b""
    while True:
        try:
            chunk = c.recv(1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    return got


def held_get(gw, s3, key):
    """A GET of a 60 MiB object with 32 MiB segments streams from one handle,
    which a paused client keeps open (more than the gateway and the socket
    buffer hold is still to come)."""
    c = raw_get(gw, s3, key, rcvbuf=65536, extra_headers="Connection: close\r\n")
    assert c.recv(12) == b"HTTP/1.1 200"
    time.sleep(0.5)
    return c


def test_put_over_a_key_a_get_holds_open_succeeds_and_the_get_keeps_the_old_version(rsamba):
    # Samba refuses to rename over a file that a handle on the same
    # connection holds open, and the PUT lands on the connection holding the
    # GET's handle (the least loaded); handles on other connections do not
    # block the rename, so publish renames from another pooled connection.
    # The held GET keeps reading the old file: all of it, never a mix.
    old = random.Random(12).randbytes(60 * MIB)
    held = put_on_share(rsamba, "readahead", "held.bin", old)
    gw = Gateway(rsamba, env={"SMBGATE_SEGMENT_SIZE": str(32 * MIB)})
    try:
        s3 = gw.client(signature_version="s3v4")
        c = held_get(gw, s3, "held.bin")
        r = s3.put_object(Bucket="readahead", Key="held.bin", Body=b"new")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert held.read_bytes() == b"new"
        assert s3.get_object(Bucket="readahead", Key="held.bin")["Body"].read() == b"new"
        got = b"HTTP/1.1 200" + read_to_end(c)
        c.close()
        head, body = got.split(b"\r\n\r\n", 1)
        assert b"content-length: %d" % len(old) in head.lower()
        assert body == old
    finally:
        gw.stop()


def test_put_over_a_key_held_open_on_every_pooled_connection_goes_through_the_spare(rsamba):
    # With one pooled connection, and the GET's handle on it, no pooled
    # connection can rename over the object: the pool's spare connection,
    # on which the gateway never keeps a file open, can. The held GET keeps
    # reading the old file, all of it. (With more readers than connections,
    # an overwrite race on a loaded machine answered a PUT 503 before.)
    old = random.Random(13).randbytes(60 * MIB)
    held = put_on_share(rsamba, "readahead", "held1.bin", old)
    gw = Gateway(rsamba, env={"SMBGATE_SEGMENT_SIZE": str(32 * MIB), "SMBGATE_POOL_SIZE": "1"})
    try:
        s3 = gw.client(signature_version="s3v4")
        c = held_get(gw, s3, "held1.bin")
        r = s3.put_object(Bucket="readahead", Key="held1.bin", Body=b"new")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert held.read_bytes() == b"new"
        got = b"HTTP/1.1 200" + read_to_end(c)
        c.close()
        assert got.split(b"\r\n\r\n", 1)[1] == old
    finally:
        gw.stop()


def test_put_over_a_key_held_open_with_no_connection_left_is_slowdown_not_access_denied(rsamba):
    # When the spare connection cannot be made either (the server takes no
    # new connection, here a proxy refusing them), the rename has nowhere
    # else to go: the PUT gets a retryable 503 SlowDown that says why, and
    # the old object stays whole.
    from botocore.exceptions import ClientError
    old = random.Random(14).randbytes(60 * MIB)
    held = put_on_share(rsamba, "readahead", "held2.bin", old)
    proxy = ResetProxy(rsamba.port)
    share = f"smb://127.0.0.1:{proxy.port}/{rsamba.env['SMB_SHARE']}"
    gw = Gateway(rsamba, env={"SMBGATE_SHARE": share, "SMBGATE_SEGMENT_SIZE": str(32 * MIB),
                              "SMBGATE_POOL_SIZE": "1"})
    try:
        s3 = gw.client(signature_version="s3v4")
        c = held_get(gw, s3, "held2.bin")
        proxy.refuse(True)
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket="readahead", Key="held2.bin", Body=b"new")
        err = exc.value.response
        assert err["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert err["Error"]["Code"] == "SlowDown"
        assert "open for reading" in err["Error"]["Message"]
        c.close()
        assert held.read_bytes() == old
    finally:
        gw.stop()
        proxy.stop()


def test_clients_hanging_up_mid_get_leave_no_handle_open(rsamba):
    # Clients that hang up while later segments are being fetched ahead on
    # other connections must not leave the file open on the share: Samba
    # would then refuse renames over it for the connection's lifetime (PUT
    # 503, and 403 after a DELETE). The previous build left one handle per
    # hang-up or so.
    data = random.Random(40).randbytes(40 * MIB)
    path = put_on_share(rsamba, "readahead", "hangup.bin", data)
    gw = Gateway(rsamba, env={"SMBGATE_POOL_SIZE": "2", "SMBGATE_SEGMENT_SIZE": str(2 * MIB),
                              "SMBGATE_PREFETCH": "4"})
    try:
        s3 = gw.client(signature_version="s3v4")
        for _ in range(8):
            c = raw_get(gw, s3, "hangup.bin", rcvbuf=65536)
            got = 0
            while got < 3 * MIB:
                chunk = c.recv(1 << 20)
                assert chunk, "GET ended early"
                got += len(chunk)
            c.close()
            time.sleep(0.2)
        deadline = time.monotonic() + 10
        while open_handles(rsamba, "hangup.bin") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_handles(rsamba, "hangup.bin") == []
        r = s3.put_object(Bucket="readahead", Key="hangup.bin", Body=b"new")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert path.read_bytes() == b"new"
    finally:
        gw.stop()
