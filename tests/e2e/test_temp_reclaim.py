"""Temp files of dead writers are reclaimed as soon as their writer is gone
(issue 10, point 4; failure class 16): the sweep deletes a temp file only
through an open that shares nothing, which the server refuses while any
writer, on any instance, connection or lane, still holds the file.

One gateway is killed (-9) mid-PUT; another, sweeping every second, removes
its temp file once smbd lets go of the dead writer's durable handles (their
timeout is 60 s), while a third gateway's PUT, stalled between bursts for
longer than the sweep interval, keeps its temp file and publishes its exact
bytes."""

import hashlib
import http.client
import os
import time

from conftest import Gateway

MIB = 1 << 20


def start_put(gw, bucket, key, total):
    """A PUT of `total` declared bytes through a SigV4 presigned URL, headers
    sent, no body yet; returns the connection."""
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=120)
    conn.putrequest("PUT", url[len(gw.endpoint):], skip_accept_encoding=True)
    conn.putheader("Content-Length", str(total))
    conn.endheaders()
    return conn


def temp_files(samba):
    return {p.name: p for p in (samba.share_path / ".smbgate" / "tmp").iterdir() if not p.name.startswith("clock-")}


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_dead_writers_temp_file_goes_and_a_live_ones_stays(own_samba):
    dying = Gateway(own_samba)
    dying.client().create_bucket(Bucket="reclaim")
    body1 = os.urandom(24 * MIB)
    c1 = start_put(dying, "reclaim", "dies.bin", 64 * MIB)
    c1.send(body1)
    wait_for(lambda: sum(p.stat().st_size for p in temp_files(own_samba).values()) >= 16 * MIB, 30,
             "the dying PUT's bytes on the share")
    dying.proc.kill()
    dying.proc.wait()
    dead = set(temp_files(own_samba))
    assert dead, "the killed PUT left no temp file to reclaim"
    c1.close()
    dying.log.close()

    writer = Gateway(own_samba)
    sweeper = Gateway(own_samba, env={"SMBGATE_SWEEP_INTERVAL": "1s",
                                      "SMBGATE_LOG": "warn,smbgate::store::sweep=debug"})
    try:
        body2 = os.urandom(32 * MIB)
        c2 = start_put(writer, "reclaim", "lives.bin", len(body2))
        sent = 12 * MIB
        c2.send(body2[:sent])
        wait_for(lambda: set(temp_files(own_samba)) - dead, 30, "the live PUT's temp file")
        live = set(temp_files(own_samba)) - dead
        # Bursts 3 s apart: longer than the sweep interval, so the sweeper
        # tries the live temp file too, and must be refused.
        def refused_live():
            sweeper.log.flush()
            lines = open(sweeper.log.name).read().splitlines()
            return any(f"temp={n}" in l and "held open by a live writer" in l for n in live for l in lines)

        deadline = time.monotonic() + 150
        # Until the dead writer's files are gone and the sweeper has tried
        # the live one (and been refused).
        while set(temp_files(own_samba)) & dead or not refused_live():
            assert time.monotonic() < deadline, \
                f"dead writer's files left: {set(temp_files(own_samba)) & dead}; live one tried: {refused_live()}"
            if sent < len(body2) - MIB:
                c2.send(body2[sent:sent + 256 * 1024])
                sent += 256 * 1024
            time.sleep(3)
        assert live <= set(temp_files(own_samba)), "the live PUT's temp file is gone"
        c2.send(body2[sent:])
        r = c2.getresponse()
        assert r.status == 200, r.read()
        assert r.getheader("ETag") == '"%s"' % hashlib.md5(body2).hexdigest()
        assert (own_samba.share_path / "reclaim" / "lives.bin").read_bytes() == body2
        assert not (own_samba.share_path / "reclaim" / "dies.bin").exists()
        wait_for(lambda: temp_files(own_samba) == {}, 10, "no temp file left")
    finally:
        writer.stop()
        sweeper.stop()
