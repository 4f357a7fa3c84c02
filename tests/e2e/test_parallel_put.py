"""Parallel PUT (issue 4): a large PUT or UploadPart body is written as
segments at their offsets over several pooled SMB connections. These tests run
a gateway with 1 MiB segments over 3 connections, so modest bodies cross many
segment and lane boundaries, and check the bytes on the share, the ETag, that
the body really was spread (smbd reports the temp file open by 3 processes),
and that an aborted spread PUT leaves nothing behind. The last tests leave
the count to `auto`: it grows where each connection is capped (a test proxy
carries 8 MiB/s per connection) and stays at one where the client sets the
pace."""

import hashlib
import random
import re
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
from boto3.s3.transfer import TransferConfig

from conftest import Gateway
from resetproxy import ResetProxy
from test_faults import _raw_put_start, tmp_entries, wait_for, status_of, log_text

MIB = 1 << 20
LANES = 3


@pytest.fixture(scope="module")
def psamba(own_samba):
    return own_samba


@pytest.fixture(scope="module")
def pgw(psamba):
    g = Gateway(psamba, env={"SMBGATE_SEGMENT_SIZE": str(MIB), "SMBGATE_PUT_PARALLEL": str(LANES)})
    yield g
    g.stop()


@pytest.fixture
def ps3(pgw):
    return pgw.client()


@pytest.fixture
def pbucket(ps3):
    name = f"p-{uuid.uuid4().hex[:12]}"
    ps3.create_bucket(Bucket=name)
    return name


def smbd_pids_holding(samba, name_part):
    """PIDs of the smbd processes that have a file whose name contains
    `name_part` open (smbstatus -L)."""
    out = subprocess.run(["smbstatus", "-L", "-s", f"{samba.env['SMB_DIR']}/smb.conf"],
                         capture_output=True, text=True, check=True).stdout
    pids = set()
    for line in out.splitlines():
        if name_part in line:
            m = re.match(r"\s*(\d+)\s", line)
            if m:
                pids.add(int(m.group(1)))
    return pids


@pytest.mark.parametrize("size", [3 * MIB, 5 * MIB + 12345, 10 * MIB - 1])
def test_spread_put_bytes_and_etag(pgw, ps3, pbucket, psamba, size):
    body = random.Random(size).randbytes(size)
    key = f"big/{size}.bin"
    r = ps3.put_object(Bucket=pbucket, Key=key, Body=body)
    md5 = hashlib.md5(body).hexdigest()
    assert r["ETag"] == f'"{md5}"'
    on_share = (psamba.share_path / pbucket / "big" / f"{size}.bin").read_bytes()
    assert len(on_share) == size
    assert hashlib.md5(on_share).hexdigest() == md5
    got = ps3.get_object(Bucket=pbucket, Key=key)
    assert got["ETag"] == f'"{md5}"'
    assert got["Body"].read() == body
    assert tmp_entries(psamba) == []


def test_spread_put_uses_several_connections(pgw, ps3, pbucket, psamba):
    total = 8 * MIB
    body = random.Random(8).randbytes(total)
    sock = _raw_put_start(pgw, ps3, pbucket, "spread.bin", total)
    try:
        # 4.5 segments in: lanes 0, 1 and 2 have each taken a segment.
        sock.sendall(body[: 4 * MIB + MIB // 2])
        assert wait_for(lambda: tmp_entries(psamba) != [], 10)
        temp = tmp_entries(psamba)[0]
        assert wait_for(lambda: len(smbd_pids_holding(psamba, temp)) == LANES, 10), \
            f"temp file open by {smbd_pids_holding(psamba, temp)}, expected {LANES} smbd processes"
        sock.sendall(body[4 * MIB + MIB // 2:])
        resp = sock.recv(4096).decode(errors="replace")
        assert resp.startswith("HTTP/1.1 200"), resp
    finally:
        sock.close()
    assert (psamba.share_path / pbucket / "spread.bin").read_bytes() == body
    assert wait_for(lambda: smbd_pids_holding(psamba, temp) == set(), 5), "lane handles left open"
    assert tmp_entries(psamba) == []


@pytest.mark.parametrize("previous", [False, True], ids=["new-key", "overwrite"])
def test_abort_mid_spread_put_leaves_nothing(pgw, ps3, pbucket, psamba, previous):
    key = "aborted.bin"
    old = b"old version\n" * 5000
    if previous:
        ps3.put_object(Bucket=pbucket, Key=key, Body=old)
    total = 12 * MIB
    body = random.Random(12).randbytes(total)
    sock = _raw_put_start(pgw, ps3, pbucket, key, total)
    sock.sendall(body[: 7 * MIB])
    assert wait_for(lambda: tmp_entries(psamba) != [], 10)
    temp = tmp_entries(psamba)[0]
    assert wait_for(lambda: len(smbd_pids_holding(psamba, temp)) == LANES, 10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    assert wait_for(lambda: tmp_entries(psamba) == [], 5), \
        f"temp files left after the client went away: {tmp_entries(psamba)}\n{log_text(pgw)}"
    assert wait_for(lambda: smbd_pids_holding(psamba, temp) == set(), 5), "lane handles left open"
    if previous:
        assert ps3.get_object(Bucket=pbucket, Key=key)["Body"].read() == old
    else:
        assert status_of(lambda: ps3.head_object(Bucket=pbucket, Key=key)) == 404
    new = b"after\n"
    ps3.put_object(Bucket=pbucket, Key=key, Body=new)
    assert ps3.get_object(Bucket=pbucket, Key=key)["Body"].read() == new


def test_spread_upload_parts(pgw, ps3, pbucket, psamba):
    # 5 MiB parts (S3's minimum) cross five 1 MiB segments each, written at
    # (n-1) x 5 MiB of the upload's data file over 3 lanes; parts go up in parallel.
    size = 17 * MIB + 777
    body = random.Random(17).randbytes(size)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=4)
    from io import BytesIO
    ps3.upload_fileobj(BytesIO(body), pbucket, "mp.bin", Config=cfg)
    parts = [body[i:i + 5 * MIB] for i in range(0, size, 5 * MIB)]
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + f"-{len(parts)}"
    head = ps3.head_object(Bucket=pbucket, Key="mp.bin")
    assert head["ETag"] == f'"{want}"'
    assert head["ContentLength"] == size
    assert (psamba.share_path / pbucket / "mp.bin").read_bytes() == body
    assert ps3.get_object(Bucket=pbucket, Key="mp.bin")["Body"].read() == body


def test_spent_write_behind_budget_means_one_connection_and_small_writes(psamba):
    # With no write-behind budget a body still goes through, over one
    # connection with 1 MiB in flight.
    gw = Gateway(psamba, env={"SMBGATE_SEGMENT_SIZE": str(MIB), "SMBGATE_PUT_PARALLEL": str(LANES),
                              "SMBGATE_WRITE_BEHIND_BUDGET": "0"})
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="nobudget")
        total = 8 * MIB + 3
        body = random.Random(80).randbytes(total)
        sock = _raw_put_start(gw, s3, "nobudget", "one-lane.bin", total)
        try:
            sock.sendall(body[: 5 * MIB])
            assert wait_for(lambda: tmp_entries(psamba) != [], 10)
            temp = tmp_entries(psamba)[0]
            time.sleep(0.5)
            assert len(smbd_pids_holding(psamba, temp)) == 1
            sock.sendall(body[5 * MIB:])
            resp = sock.recv(4096).decode(errors="replace")
            assert resp.startswith("HTTP/1.1 200"), resp
            assert f'"{hashlib.md5(body).hexdigest()}"' in resp
        finally:
            sock.close()
        assert (psamba.share_path / "nobudget" / "one-lane.bin").read_bytes() == body
        assert tmp_entries(psamba) == []
    finally:
        gw.stop()


def test_large_put_into_a_missing_bucket_fails_before_the_body_is_written(pgw, ps3, psamba):
    # NoSuchBucket comes back while the client is still sending, and no temp
    # file is written.
    total = 64 * MIB
    sock = _raw_put_start(pgw, ps3, "no-such-bucket-here", "big.bin", total)
    try:
        sock.sendall(random.Random(3).randbytes(2 * MIB))
        sock.settimeout(10)
        resp = sock.recv(4096).decode(errors="replace")
    finally:
        sock.close()
    assert resp.startswith("HTTP/1.1 404"), resp
    assert "<Code>NoSuchBucket</Code>" in resp
    assert tmp_entries(psamba) == []


def put_watching_lanes(gw, s3, samba, bucket, key, body, chunk=256 << 10, pause=0.0):
    """PUTs `body` on a raw socket from a thread, `chunk` bytes at a time with
    `pause` seconds between them, while counting the smbd processes that hold
    its temp file open. Returns (the most seen at once, the answer's head)."""
    sock = _raw_put_start(gw, s3, bucket, key, len(body))
    answer = {}

    def send():
        for i in range(0, len(body), chunk):
            sock.sendall(body[i:i + chunk])
            if pause:
                time.sleep(pause)
        answer["head"] = sock.recv(4096).decode(errors="replace")

    t = threading.Thread(target=send)
    t.start()
    most = 0
    try:
        while t.is_alive():
            temps = tmp_entries(samba)
            if temps:
                most = max(most, len(smbd_pids_holding(samba, temps[0])))
            time.sleep(0.05)
        t.join()
    finally:
        sock.close()
    return most, answer.get("head", "")


def auto_lanes_gateway(samba, share=None):
    # 1 MiB segments and 4 MiB in flight: at most 4 lanes. Each change of the
    # count is logged.
    env = {"SMBGATE_SEGMENT_SIZE": str(MIB), "SMBGATE_WRITE_BEHIND_BUDGET": str(4 * MIB),
           "SMBGATE_PUT_PARALLEL": "auto", "SMBGATE_LOG": "warn,smbgate::store::spread=debug"}
    if share:
        env["SMBGATE_SHARE"] = share
    return Gateway(samba, env=env)


def test_auto_lanes_grow_where_each_connection_is_capped(psamba):
    proxy = ResetProxy(psamba.port)
    # Slow enough that each lane's gain is seconds, not a scheduler's
    # hiccup, even on a busy machine.
    proxy.rate = 2 * MIB
    gw = auto_lanes_gateway(psamba, f"smb://127.0.0.1:{proxy.port}/{psamba.env['SMB_SHARE']}")
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="capped")
        body = random.Random(32).randbytes(32 * MIB)
        most, head = put_watching_lanes(gw, s3, psamba, "capped", "capped.bin", body)
        assert head.startswith("HTTP/1.1 200"), head
        assert most == 4, f"temp file open by at most {most} smbd processes, expected 4 lanes"
        # ... and kept them: the last change of the count went to 4.
        gw.log.flush()
        log = open(gw.log.name, errors="replace").read()
        changes = re.findall(r"PUT lanes changed.*? before=(\d+) now=(\d+)", log)
        assert changes and changes[-1] == ("2", "4"), changes
        assert (psamba.share_path / "capped" / "capped.bin").read_bytes() == body
        assert s3.head_object(Bucket="capped", Key="capped.bin")["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
        assert tmp_entries(psamba) == []
    finally:
        gw.stop()
        proxy.stop()


def test_auto_lanes_stay_at_one_when_the_client_sets_the_pace(psamba):
    gw = auto_lanes_gateway(psamba)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="paced")
        body = random.Random(12).randbytes(12 * MIB)
        # About 2 MiB/s, far under what one connection to smbd carries
        # even on a busy machine.
        most, head = put_watching_lanes(gw, s3, psamba, "paced", "paced.bin", body, pause=0.12)
        assert head.startswith("HTTP/1.1 200"), head
        assert most == 1, f"temp file open by {most} smbd processes, expected one lane"
        assert (psamba.share_path / "paced" / "paced.bin").read_bytes() == body
    finally:
        gw.stop()
