"""HTTPS (issue 12, point 2): smbgate serves TLS itself from PEM files,
with ALPN h2 and http/1.1, an optional plain-HTTP listener beside it, and
a certificate that SIGHUP reloads. The CA and certificates are made here
with the openssl command; clients trust only that CA."""

import hashlib
import os
import signal
import socket
import ssl
import subprocess
import time
import uuid

import boto3
import pytest
from botocore.config import Config

from conftest import ACCESS_KEY, BIN, REGION, ROOT as ROOT_DIR, SECRET_KEY, Gateway, _free_port, smbgate_bin


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=smbgate test CA", cwd=d)


def make_cert(d, name, cn):
    """A server certificate for 127.0.0.1 and localhost, signed by the CA in `d`:
    `name`.pem (certificate) and `name`.key."""
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={cn}", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", "san.ext", cwd=d)


def der_of(pem_path):
    return ssl.PEM_cert_to_DER_cert(pem_path.read_text())


def served_cert(port, cafile, alpn=("h2", "http/1.1")):
    """The DER certificate and ALPN protocol of one fresh TLS connection."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.set_alpn_protocols(list(alpn))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True), s.selected_alpn_protocol()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    make_ca(d)
    make_cert(d, "server", "first")
    make_cert(d, "renewed", "renewed")
    # What smbgate reads; the tests replace these files.
    (d / "live.pem").write_bytes((d / "server.pem").read_bytes())
    (d / "live.key").write_bytes((d / "server.key").read_bytes())
    (d / "live.key").chmod(0o600)  # a key every user may read is refused as root
    return d


@pytest.fixture(scope="module")
def tls_gw(samba, pki):
    plain_port = _free_port()
    g = Gateway(samba, env={
        "SMBGATE_TLS_CERT": str(pki / "live.pem"),
        "SMBGATE_TLS_KEY": str(pki / "live.key"),
        "SMBGATE_LISTEN_PLAIN": f"127.0.0.1:{plain_port}",
        "SMBGATE_LOG": "info",
    })
    g.https = f"https://127.0.0.1:{g.port}"
    g.plain = f"http://127.0.0.1:{plain_port}"
    yield g
    g.stop()


def s3_client(endpoint, **kw):
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=REGION,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}), **kw)


def test_boto3_over_https_trusting_only_the_test_ca(tls_gw, pki):
    s3 = s3_client(tls_gw.https, verify=str(pki / "ca.pem"))
    bucket = f"tls-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(3 << 20)
    r = s3.put_object(Bucket=bucket, Key="dir/blob.bin", Body=body)
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    assert s3.get_object(Bucket=bucket, Key="dir/blob.bin")["Body"].read() == body
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["dir/blob.bin"]
    # The same gateway through its plain listener sees the same object.
    plain = s3_client(tls_gw.plain)
    assert plain.head_object(Bucket=bucket, Key="dir/blob.bin")["ContentLength"] == len(body)


def test_a_client_without_the_ca_refuses_the_certificate(tls_gw):
    s3 = s3_client(tls_gw.https)  # system trust store only
    with pytest.raises(Exception) as e:
        s3.list_buckets()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(e.value)


def test_plain_http_on_the_tls_port_gets_no_s3_answer(tls_gw):
    s3 = s3_client(f"http://127.0.0.1:{tls_gw.port}")
    with pytest.raises(Exception) as e:
        s3.list_buckets()
    assert "ClientError" not in type(e.value).__name__


def test_alpn_offers_h2_and_http11(tls_gw, pki):
    assert served_cert(tls_gw.port, pki / "ca.pem")[1] == "h2"
    assert served_cert(tls_gw.port, pki / "ca.pem", alpn=("http/1.1",))[1] == "http/1.1"


def test_aws_cli_and_rclone_with_the_test_ca(tls_gw, pki, tmp_path):
    bucket = f"tls-cli-{uuid.uuid4().hex[:8]}"
    src = tmp_path / "up.bin"
    src.write_bytes(os.urandom(700_000))
    env = tls_gw.aws_env()
    aws = [str(BIN / "aws"), "--endpoint-url", tls_gw.https, "--ca-bundle", str(pki / "ca.pem")]
    for args in (["s3", "mb", f"s3://{bucket}"], ["s3", "cp", str(src), f"s3://{bucket}/up.bin"],
                 ["s3", "cp", f"s3://{bucket}/up.bin", str(tmp_path / "down.bin")]):
        r = subprocess.run(aws + args, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "down.bin").read_bytes() == src.read_bytes()

    conf = tmp_path / "rclone.conf"
    conf.write_text(
        "[gw]\ntype = s3\nprovider = Other\n"
        f"access_key_id = {ACCESS_KEY}\nsecret_access_key = {SECRET_KEY}\n"
        f"endpoint = {tls_gw.https}\nregion = {REGION}\n")
    r = subprocess.run([str(BIN / "rclone"), "--config", str(conf), "--ca-cert", str(pki / "ca.pem"),
                        "cat", f"gw:{bucket}/up.bin"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == src.read_bytes()


def wait_for_log(gw, text, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        gw.log.flush()
        if text in open(gw.log.name, errors="replace").read():
            return True
        time.sleep(0.05)
    return False


def test_sighup_serves_a_renewed_certificate_and_keeps_it_through_a_bad_file(tls_gw, pki):
    ca = pki / "ca.pem"
    assert served_cert(tls_gw.port, ca)[0] == der_of(pki / "server.pem")
    # Renewal: new files, then SIGHUP; new connections get the new certificate.
    (pki / "live.key").write_bytes((pki / "renewed.key").read_bytes())
    (pki / "live.pem").write_bytes((pki / "renewed.pem").read_bytes())
    tls_gw.proc.send_signal(signal.SIGHUP)
    assert wait_for_log(tls_gw, "TLS certificate reloaded")
    assert served_cert(tls_gw.port, ca)[0] == der_of(pki / "renewed.pem")
    # A key that does not match: refused, the renewed pair stays, smbgate runs on.
    (pki / "live.key").write_bytes((pki / "server.key").read_bytes())
    tls_gw.proc.send_signal(signal.SIGHUP)
    assert wait_for_log(tls_gw, "TLS certificate not reloaded")
    assert tls_gw.proc.poll() is None
    assert served_cert(tls_gw.port, ca)[0] == der_of(pki / "renewed.pem")
    s3_client(tls_gw.https, verify=str(ca)).list_buckets()
    (pki / "live.key").write_bytes((pki / "renewed.key").read_bytes())


@pytest.mark.parametrize("case", ["garbage key", "key of another certificate", "missing certificate"])
def test_bad_tls_files_are_refused_at_startup_in_one_line(samba, pki, tmp_path, case):
    cert, key = pki / "server.pem", pki / "server.key"
    if case == "garbage key":
        key = tmp_path / "bad.key"
        key.write_text("-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n")
        key.chmod(0o600)
    elif case == "key of another certificate":
        key = pki / "renewed.key"
    else:
        cert = tmp_path / "absent.pem"
    env = dict(os.environ)
    env.update({
        "SMBGATE_LISTEN": f"127.0.0.1:{_free_port()}",
        "SMBGATE_SHARE": f"smb://127.0.0.1:{samba.port}/{samba.env['SMB_SHARE']}",
        "SMBGATE_SMB_USER": samba.env["SMB_USER"], "SMBGATE_SMB_PASSWORD": samba.env["SMB_PASSWORD"],
        "SMBGATE_ACCESS_KEY": ACCESS_KEY, "SMBGATE_SECRET_KEY": SECRET_KEY,
        "SMBGATE_TLS_CERT": str(cert), "SMBGATE_TLS_KEY": str(key), "SMBGATE_LOG": "warn",
    })
    r = subprocess.run([smbgate_bin(), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    want = {"garbage key": f"smbgate: TLS key {key}",
            "key of another certificate": f"smbgate: TLS key {key} does not belong to the certificate in {cert}",
            "missing certificate": f"smbgate: TLS certificate {cert}"}[case]
    assert lines[0].startswith(want), lines[0]


def test_a_tls_key_every_user_may_read_is_refused_as_the_other_secret_files(samba, pki, tmp_path):
    """Issue 43, item 5: the TLS key is held to its mode like the other
    secret files: refused (as root) at startup, by config check with the
    same line, and on SIGHUP, where the pair in force stays."""
    key = tmp_path / "loose.key"
    key.write_bytes((pki / "server.key").read_bytes())
    key.chmod(0o644)
    line = (f"smbgate: TLS key {key}: refused, since every user may read or change it (mode 644) and the "
            "gateway runs as root; chmod o-rwx it")
    with pytest.raises(RuntimeError) as e:
        Gateway(samba, env={"SMBGATE_TLS_CERT": str(pki / "server.pem"), "SMBGATE_TLS_KEY": str(key)})
    assert str(e.value).removeprefix("smbgate exited: ").strip() == line, str(e.value)
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(f'share = "smb://127.0.0.1:1/s"\naccess_key = "AK"\nsecret_key_file = "sk"\n'
                   f'tls_cert = "{pki / "server.pem"}"\ntls_key = "{key}"\n')
    (tmp_path / "sk").write_text("secret\n")
    (tmp_path / "sk").chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], env=env, capture_output=True, text=True)
    assert (r.returncode, r.stderr.strip()) == (1, line), r.stderr
    # On reload: refused, the certificate in force stays.
    live = tmp_path / "live.key"
    live.write_bytes((pki / "server.key").read_bytes())
    live.chmod(0o600)
    g = Gateway(samba, env={"SMBGATE_TLS_CERT": str(pki / "server.pem"), "SMBGATE_TLS_KEY": str(live),
                            "SMBGATE_LOG": "info"})
    try:
        live.chmod(0o644)
        g.proc.send_signal(signal.SIGHUP)
        assert wait_for_log(g, "TLS certificate not reloaded")
        assert "(mode 644)" in open(g.log.name).read()
        assert served_cert(g.port, pki / "ca.pem")[0] == der_of(pki / "server.pem")
    finally:
        g.stop()


def test_haproxy_speaks_tls_to_tls_instances_as_the_docs_show(own_samba, pki, tmp_path):
    """Issue 43, item 6: docs/deployment.md shows the `server` lines for
    instances that run TLS (`ssl verify required ca-file ... check-ssl`,
    after send-proxy-v2). Those very options, with the test CA, in front of
    two TLS instances: the health checks keep both up, requests go through
    both, and the PROXY header before TLS names the client."""
    from conftest import HAProxy
    from s3util import read_lines
    doc = (ROOT_DIR / "docs" / "deployment.md").read_text()
    block = next(b for b in doc.split("```")[1::2] if "check-ssl" in b)
    line = next(l for l in block.splitlines() if l.strip().startswith("server gw0 "))
    opts = line.split(None, 3)[3].replace("/etc/haproxy/smbgate-ca.pem", str(pki / "ca.pem"))
    assert "ssl" in opts.split() and "check-ssl" in opts.split() and "verify required" in opts, opts
    (pki / "gw.ext").write_text("subjectAltName=DNS:gw0.internal,DNS:gw1.internal\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "gw.key", "-out", "gw.csr", "-subj", "/CN=gw",
            cwd=pki)
    openssl("x509", "-req", "-in", "gw.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "gw.pem", "-days", "2", "-extfile", "gw.ext", cwd=pki)
    (pki / "gw.key").chmod(0o600)
    gws = []
    try:
        for name in ("a", "b"):
            log = tmp_path / f"{name}.jsonl"
            g = Gateway(own_samba, env={"SMBGATE_TLS_CERT": str(pki / "gw.pem"), "SMBGATE_TLS_KEY": str(pki / "gw.key"),
                                        "SMBGATE_TRUSTED_PROXIES": "127.0.0.9", "SMBGATE_PROXY_PROTOCOL": "true",
                                        "SMBGATE_ACCESS_LOG": str(log)})
            g.access_log = log
            gws.append(g)
        lb = HAProxy(gws, tmp_path, server_opts=f"{opts} source 127.0.0.9")
        try:
            s3 = lb.client()
            bucket = f"lb-tls-{uuid.uuid4().hex[:8]}"
            s3.create_bucket(Bucket=bucket)
            for i in range(4):
                s3.put_object(Bucket=bucket, Key=f"k{i}", Body=b"through HAProxy over TLS")
            assert len(s3.list_objects_v2(Bucket=bucket)["Contents"]) == 4
            for g in gws:
                lines = [l for l in read_lines(g.access_log, 1) if l.get("bucket") == bucket]
                assert lines and {l["client"] for l in lines} == {"127.0.0.1"}, lines
        finally:
            lb.stop()
    finally:
        for g in gws:
            g.stop()
