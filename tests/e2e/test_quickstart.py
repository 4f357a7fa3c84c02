"""./scripts/quickstart as a newcomer runs it: it serves S3 with the secret
SMBGATE_QUICKSTART_SECRET fixes, and a SIGTERM to the script (not only
Ctrl-C to its process group) stops smbgate and removes the share."""

import os
import signal
import socket
import subprocess
import time

import boto3
from botocore.config import Config

from conftest import ROOT, _free_port, smbgate_bin


def test_sigterm_to_the_quickstart_stops_smbgate_and_removes_the_share():
    port = _free_port()
    env = dict(os.environ, SMBGATE_BIN=str(smbgate_bin()), SMBGATE_QUICKSTART_SECRET="fixedsecret123")
    p = subprocess.Popen([str(ROOT / "scripts/quickstart"), "--listen", f"127.0.0.1:{port}"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out = ""
        deadline = time.monotonic() + 60
        while "stops smbgate" not in out and time.monotonic() < deadline:
            out += p.stdout.readline()
        assert "AWS_SECRET_ACCESS_KEY=fixedsecret123" in out, out
        share = next(w for w in out.split() if w.startswith("/") and w.endswith("/share)")).rstrip(")")
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                          aws_access_key_id="smbgate-quickstart", aws_secret_access_key="fixedsecret123",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="demo")
        s3.put_object(Bucket="demo", Key="hello.txt", Body=b"hello\n")
        assert s3.get_object(Bucket="demo", Key="hello.txt")["Body"].read() == b"hello\n"

        p.send_signal(signal.SIGTERM)  # the script only, as `kill <pid>` does
        rest, _ = p.communicate(timeout=60)
        assert "smbgate stopped; the throwaway share is removed." in rest, rest
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "smbgate still listening"
        assert not os.path.exists(share), share
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def test_help_and_unknown_arguments():
    r = subprocess.run([str(ROOT / "scripts/quickstart"), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("usage: ") and "--listen ADDR:PORT" in r.stdout, r
    r = subprocess.run([str(ROOT / "scripts/quickstart"), "--lisen", "x"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown argument '--lisen'" in r.stderr, r


def test_a_failed_start_says_so_and_prints_no_commands():
    # --listen=ADDR as well as --listen ADDR; the port is taken, so smbgate
    # stops at once: the script exits non-zero, with smbgate's reason and no
    # commands to paste, and removes the share.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, SMBGATE_BIN=str(smbgate_bin()))
        r = subprocess.run([str(ROOT / "scripts/quickstart"), f"--listen=127.0.0.1:{port}"], env=env,
                           capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "smbgate did not start" in out and "Paste into another shell" not in out, out
    assert "the throwaway share is removed" in out, out
