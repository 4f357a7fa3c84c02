"""PUTs and UploadParts survive lost SMB connections (issue 9, point 4).

A proxy between smbgate and smbd resets every TCP connection (smbd stays
up) while a body streams in. The writer reopens its file on a new
connection, reclaiming its durable handle or reopening the same file by
name (smb_client::durable), sends again what smbd had not acknowledged,
and the client never sees the resets: 200, the exact bytes, the right
ETag. An outage longer than the pool's 10 s wait answers 503 SlowDown and
leaves the old object and no temp file."""

import hashlib
import random
import socket
import threading
import time
import urllib.parse

import pytest

from conftest import Gateway
from resetproxy import ResetProxy

MIB = 1 << 20


@pytest.fixture(scope="module")
def rsamba(own_samba):
    return own_samba


@pytest.fixture
def proxy(rsamba):
    p = ResetProxy(rsamba.port)
    yield p
    p.stop()


def gateway_via(proxy, samba, **env):
    share = f"smb://127.0.0.1:{proxy.port}/{samba.env['SMB_SHARE']}"
    return Gateway(samba, env={"SMBGATE_SHARE": share, "SMBGATE_LOG": "info", **env})


def log_text(gw):
    gw.log.flush()
    with open(gw.log.name) as f:
        return f.read()


def tmp_entries(samba):
    d = samba.share_path / ".smbgate" / "tmp"
    # The sweep's clock probes (`clock-*`) are no one's upload.
    return sorted(p.name for p in d.iterdir() if not p.name.startswith("clock-")) if d.exists() else []


def raw_put(gw, url, body, chunk=4 * MIB, pace=0.0, at=(), then=lambda: None):
    """Sends a presigned PUT's body in `chunk`s, `pace` seconds apart,
    calling `then()` once the body bytes sent first reach each offset in
    `at` (so a fault lands mid-body whatever the machine's speed).
    Returns (status, response head, response body)."""
    u = urllib.parse.urlsplit(url)
    sock = socket.create_connection(("127.0.0.1", gw.port), timeout=60)
    head = f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode())
    view = memoryview(body)
    marks = sorted(at)
    try:
        for i in range(0, len(body), chunk):
            sock.sendall(view[i:i + chunk])
            while marks and i + chunk >= marks[0]:
                marks.pop(0)
                time.sleep(0.2)  # let the gateway write what it has
                then()
            if pace:
                time.sleep(pace)
    except OSError:
        pass  # answered early; read the answer
    resp = b""
    while b"\r\n\r\n" not in resp:
        b = sock.recv(65536)
        if not b:
            break
        resp += b
    head, _, rest = resp.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        b = sock.recv(65536)
        if not b:
            break
        rest += b
    sock.close()
    return int(head.split(b" ")[1]), head, rest


def presigned(gw, method, **params):
    return gw.client(signature_version="s3v4").generate_presigned_url(method, Params=params, ExpiresIn=600)


@pytest.mark.parametrize("lanes", ["1", "4"])
def test_a_200_mib_put_survives_three_resets_of_every_smb_connection(rsamba, proxy, lanes):
    # lanes=1: one connection writes the temp file; its durable handle is
    # reclaimed. lanes=4: the body is spread over four connections, which
    # break each other's oplocks (no handle stays durable), so each lane
    # reopens the same file by name on its own.
    gw = gateway_via(proxy, rsamba, SMBGATE_PUT_PARALLEL=lanes)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="resets")
        data = random.Random(9).randbytes(200 * MIB)
        url = presigned(gw, "put_object", Bucket="resets", Key="big.bin")
        cuts = []
        # Three resets at 50, 100 and 150 MiB of the body, a second apart.
        at = [50 * MIB, 100 * MIB, 150 * MIB]
        status, head, body = raw_put(gw, url, data, pace=0.02, at=at,
                                     then=lambda: (cuts.append(proxy.reset_all()), time.sleep(1.0)))
        log = log_text(gw)
        assert status == 200, (head, body, log)
        assert len(cuts) == 3 and all(c > 0 for c in cuts), cuts
        assert "reopening the file on another connection" in log, log
        if lanes == "1":
            assert "durable handle reclaimed" in log, log
        else:
            assert "reopened by name" in log, log
        etag = hashlib.md5(data).hexdigest()
        assert f'etag: "{etag}"' in head.decode().lower(), head
        got = s3.get_object(Bucket="resets", Key="big.bin")
        assert got["ETag"] == f'"{etag}"'
        assert hashlib.md5(got["Body"].read()).hexdigest() == etag
        assert tmp_entries(rsamba) == []
    finally:
        gw.stop()


def test_every_part_of_a_multipart_upload_survives_resets(rsamba, proxy):
    gw = gateway_via(proxy, rsamba)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="mpresets")
        up = s3.create_multipart_upload(Bucket="mpresets", Key="parts.bin")["UploadId"]
        parts = [random.Random(n).randbytes(40 * MIB) for n in range(1, 6)]
        cuts = []
        etags = []
        for n, part in enumerate(parts, start=1):
            url = presigned(gw, "upload_part", Bucket="mpresets", Key="parts.bin", UploadId=up, PartNumber=n)
            # Every connection reset halfway through each part's body.
            status, head, body = raw_put(gw, url, part, chunk=2 * MIB, pace=0.01, at=[20 * MIB],
                                         then=lambda: cuts.append(proxy.reset_all()))
            assert status == 200, (n, head, body, log_text(gw))
            etags.append(hashlib.md5(part).hexdigest())
            assert f'etag: "{etags[-1]}"' in head.decode().lower(), head
        assert len(cuts) == 5 and all(c > 0 for c in cuts), cuts
        log = log_text(gw)
        assert log.count("reopening the file on another connection") >= 5, log
        done = s3.complete_multipart_upload(
            Bucket="mpresets", Key="parts.bin", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": f'"{e}"'} for n, e in enumerate(etags, 1)]})
        whole = hashlib.md5(b"".join(bytes.fromhex(e) for e in etags)).hexdigest()
        assert done["ETag"] == f'"{whole}-5"'
        got = s3.get_object(Bucket="mpresets", Key="parts.bin")["Body"].read()
        assert hashlib.md5(got).hexdigest() == hashlib.md5(b"".join(parts)).hexdigest()
    finally:
        gw.stop()


def test_an_outage_longer_than_the_pool_wait_answers_503_and_keeps_the_old_object(rsamba, proxy):
    # Every connection is reset and none may come back for 14 s (past the
    # pool's 10 s wait): the writer cannot reopen its file, so the PUT is a
    # retryable 503 SlowDown, the old version stays whole, and the temp file
    # is deleted by name once the share is reachable again.
    gw = gateway_via(proxy, rsamba)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="outage")
        old = b"the old version\n" * 4096
        s3.put_object(Bucket="outage", Key="k.bin", Body=old)
        data = random.Random(5).randbytes(64 * MIB)
        url = presigned(gw, "put_object", Bucket="outage", Key="k.bin")

        cuts = []

        def outage():
            proxy.refuse(True)
            cuts.append(proxy.reset_all())
            threading.Timer(14, proxy.refuse, args=(False,)).start()

        # The outage starts halfway through the body.
        status, head, body = raw_put(gw, url, data, chunk=2 * MIB, pace=0.01, at=[32 * MIB], then=outage)
        assert len(cuts) == 1 and cuts[0] > 0, cuts
        assert status == 503, (head, body)
        assert b"<Code>SlowDown</Code>" in body, body
        deadline = time.monotonic() + 15
        while tmp_entries(rsamba) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tmp_entries(rsamba) == [], log_text(gw)
        assert s3.get_object(Bucket="outage", Key="k.bin")["Body"].read() == old
    finally:
        gw.stop()
