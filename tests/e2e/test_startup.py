"""Startup: the smbgate binary run directly. Every configuration error ends the
process quickly with a non-zero exit and ONE line on stderr that names the
problem (issue 3, "Running it"); --anonymous with no keys serves unsigned
requests."""

import os
import signal
import socket
import subprocess
import time
import uuid

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway, _free_port, smbgate_bin, write_secret

# A startup error must come back well before this; a hang is a failure.
STARTUP_TIMEOUT = 30


def _base_env():
    """The caller's environment without any SMBGATE_* setting, so only what a
    test passes reaches the binary (SMBGATE_LOG unset: the default log level,
    as a newcomer would run it)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}


def _run(args, env=None):
    e = _base_env()
    e.update(env or {})
    t0 = time.monotonic()
    r = subprocess.run([smbgate_bin(), "serve", "--listen", f"127.0.0.1:{_free_port()}", *args],
                       env=e, capture_output=True, text=True, timeout=STARTUP_TIMEOUT)
    return r, time.monotonic() - t0


def _smb_args(samba, share=None, password=None):
    return [
        "--share", share or f"smb://127.0.0.1:{samba.port}/{samba.env['SMB_SHARE']}",
        "--smb-user", samba.env["SMB_USER"],
        "--smb-password", samba.env["SMB_PASSWORD"] if password is None else password,
    ]


KEYS = ["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY]


def _assert_one_line_failure(r, *words, any_of=()):
    """Non-zero exit; stderr is exactly one non-empty line containing every
    word in `words` (case-insensitive) and at least one of `any_of`."""
    out = f"rc={r.returncode}\nstdout={r.stdout!r}\nstderr={r.stderr!r}"
    assert r.returncode != 0, out
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, "stderr must be exactly one line:\n" + out
    line = lines[0].lower()
    for w in words:
        assert w.lower() in line, f"{w!r} not named in the reason:\n{out}"
    if any_of:
        assert any(w.lower() in line for w in any_of), f"none of {any_of} in the reason:\n{out}"
    return lines[0]


def test_unreachable_server_closed_port(samba):
    port = _free_port()  # bound and released: nothing listens there
    r, took = _run([*_smb_args(samba, share=f"smb://127.0.0.1:{port}/share"), *KEYS])
    _assert_one_line_failure(r, f"127.0.0.1:{port}", any_of=("reach", "refused", "connect"))
    assert took < 20, f"took {took:.1f}s to report a refused connection"


def test_bad_smb_password(samba):
    r, _ = _run([*_smb_args(samba, password="definitely-wrong"), *KEYS])
    _assert_one_line_failure(r, any_of=("password", "logon", "login"))


def test_missing_share(samba):
    r, _ = _run([*_smb_args(samba, share=f"smb://127.0.0.1:{samba.port}/nosuchshare"), *KEYS])
    _assert_one_line_failure(r, "nosuchshare", any_of=("not exist", "no such", "not found"))


def test_share_url_without_share_name(samba):
    r, _ = _run([*_smb_args(samba, share=f"smb://127.0.0.1:{samba.port}"), *KEYS])
    _assert_one_line_failure(r, "share")


def test_missing_share_subpath(samba):
    r, _ = _run([*_smb_args(samba, share=f"smb://127.0.0.1:{samba.port}/{samba.env['SMB_SHARE']}/nope"), *KEYS])
    line = _assert_one_line_failure(r, "nope", any_of=("not exist", "no such", "not found"))
    assert line == 'smbgate: share path "nope" does not exist', line
    # A path prints as the share names it, one backslash between parts.
    r, _ = _run([*_smb_args(samba, share=f"smb://127.0.0.1:{samba.port}/{samba.env['SMB_SHARE']}/no/such"), *KEYS])
    line = _assert_one_line_failure(r, "such", any_of=("not exist",))
    assert line == 'smbgate: share path "no\\such" does not exist', line


@pytest.mark.parametrize("keys", [[], ["--access-key", ACCESS_KEY], ["--secret-key", SECRET_KEY]],
                         ids=["none", "access-only", "secret-only"])
def test_missing_s3_keys_without_anonymous(samba, keys):
    r, _ = _run([*_smb_args(samba), *keys])
    _assert_one_line_failure(r, "--anonymous", any_of=("credential", "key"))


def test_anonymous_without_keys_serves_unsigned_requests(samba):
    port = _free_port()
    e = _base_env()
    e["SMBGATE_LOG"] = "warn"
    log = open(samba.share_path.parent / f"smbgate-{port}.log", "w")
    proc = subprocess.Popen([smbgate_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--anonymous",
                             *_smb_args(samba)], env=e, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, f"smbgate --anonymous exited {proc.returncode}: " + \
                (samba.share_path.parent / f"smbgate-{port}.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "smbgate --anonymous did not start listening"
                time.sleep(0.05)
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name=REGION,
                          config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                        retries={"total_max_attempts": 1}))
        b = f"anon-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=b)
        body = b"anonymous body\n" * 100
        s3.put_object(Bucket=b, Key="dir/k.txt", Body=body)
        assert s3.get_object(Bucket=b, Key="dir/k.txt")["Body"].read() == body
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == ["dir/k.txt"]
        assert b in [x["Name"] for x in s3.list_buckets()["Buckets"]]
        assert (samba.share_path / b / "dir" / "k.txt").read_bytes() == body
        s3.delete_object(Bucket=b, Key="dir/k.txt")
        s3.delete_bucket(Bucket=b)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=35)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_keys_configured_refuse_unsigned(gateway):
    """The converse: without --anonymous, an unsigned request is refused (403)."""
    s3 = boto3.client("s3", endpoint_url=gateway.endpoint, region_name=REGION,
                      config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                    retries={"total_max_attempts": 1}))
    with pytest.raises(ClientError) as ei:
        s3.list_buckets()
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_anonymous_with_keys_serves_unsigned_and_still_checks_signatures(samba):
    """--anonymous next to keys, with a grant of every bucket for writing:
    unsigned requests are served, signed ones must still carry a valid
    signature (before, unsigned ones got 403)."""
    g = Gateway(samba, "--anonymous", "--anonymous-bucket", "*", "--anonymous-write")
    try:
        unsigned = boto3.client("s3", endpoint_url=g.endpoint, region_name=REGION,
                                config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                              retries={"total_max_attempts": 1}))
        b = f"anonk-{uuid.uuid4().hex[:10]}"
        unsigned.create_bucket(Bucket=b)
        unsigned.put_object(Bucket=b, Key="k", Body=b"open")
        assert g.client().get_object(Bucket=b, Key="k")["Body"].read() == b"open"
        forged = boto3.client("s3", endpoint_url=g.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key="not-the-secret",
                              config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        with pytest.raises(ClientError) as ei:
            forged.get_object(Bucket=b, Key="k")
        assert ei.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    finally:
        g.stop()


# Issue 43, item 5: as on AWS, response-* overrides need a signature, so
# that an unsigned link cannot make an object answer as another type.
def test_anonymous_gets_cannot_override_response_headers(samba):
    import urllib.error
    import urllib.request
    g = Gateway(samba, "--anonymous", "--anonymous-bucket", "*")
    try:
        b = f"anono-{uuid.uuid4().hex[:10]}"
        g.client().create_bucket(Bucket=b)
        g.client().put_object(Bucket=b, Key="k", Body=b"<script>", ContentType="text/plain")
        url = f"{g.endpoint}/{b}/k"
        with urllib.request.urlopen(url) as r:
            assert r.read() == b"<script>" and r.headers["Content-Type"] == "text/plain"
        for method, query in [("GET", "response-content-type=text/html"),
                              ("GET", "x-id=GetObject&response%2Dcontent-disposition=inline"),
                              ("HEAD", "response-cache-control=no-store")]:
            with pytest.raises(urllib.error.HTTPError) as ei:
                urllib.request.urlopen(urllib.request.Request(f"{url}?{query}", method=method))
            assert ei.value.code == 400, query
            if method == "GET":
                body = ei.value.read()
                assert b"<Code>InvalidRequest</Code>" in body, body
                assert b"Request specific response headers cannot be used for anonymous GET requests." in body
        # Signed, they hold.
        got = g.client().get_object(Bucket=b, Key="k", ResponseContentType="text/html")
        assert got["ContentType"] == "text/html"
        signed = g.client().generate_presigned_url("get_object", Params={
            "Bucket": b, "Key": "k", "ResponseContentType": "text/html"})
        with urllib.request.urlopen(signed) as r:
            assert r.headers["Content-Type"] == "text/html"
    finally:
        g.stop()


def _unsigned(g):
    return boto3.client("s3", endpoint_url=g.endpoint, region_name=REGION,
                        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                      retries={"total_max_attempts": 1}))


def test_anonymous_next_to_users_gets_only_what_it_is_granted(samba):
    """Issue 23, point 6.7: next to S3 users, unsigned requests reach only
    the --anonymous-bucket buckets, and only to read unless
    --anonymous-write; --anonymous alone is refused at startup, since it
    would open every bucket as the gateway's own SMB account."""
    r, _ = _run([*_smb_args(samba), *KEYS, "--anonymous"])
    _assert_one_line_failure(r, "--anonymous-bucket", "--anonymous-write")
    r, _ = _run([*_smb_args(samba), *KEYS, "--anonymous-bucket", "pub"])
    _assert_one_line_failure(r, "--anonymous-bucket", "need --anonymous")
    pub, private = f"pub-{uuid.uuid4().hex[:8]}", f"priv-{uuid.uuid4().hex[:8]}"
    g = Gateway(samba, "--anonymous", "--anonymous-bucket", pub)
    try:
        signed, unsigned = g.client(), _unsigned(g)
        for b in (pub, private):
            signed.create_bucket(Bucket=b)
            signed.put_object(Bucket=b, Key="k", Body=b"data of " + b.encode())
        assert unsigned.get_object(Bucket=pub, Key="k")["Body"].read() == b"data of " + pub.encode()
        assert [o["Key"] for o in unsigned.list_objects_v2(Bucket=pub)["Contents"]] == ["k"]
        assert [b["Name"] for b in unsigned.list_buckets()["Buckets"]] == [pub]
        for call, kw in [(unsigned.put_object, dict(Bucket=pub, Key="new", Body=b"x")),
                         (unsigned.delete_object, dict(Bucket=pub, Key="k")),
                         (unsigned.get_object, dict(Bucket=private, Key="k")),
                         (unsigned.create_bucket, dict(Bucket=f"anon-{uuid.uuid4().hex[:8]}"))]:
            with pytest.raises(ClientError) as ei:
                call(**kw)
            assert ei.value.response["Error"]["Code"] == "AccessDenied", (call, ei.value.response)
        assert signed.get_object(Bucket=pub, Key="k")["Body"].read() == b"data of " + pub.encode()
    finally:
        g.stop()
    g = Gateway(samba, "--anonymous", "--anonymous-bucket", pub, "--anonymous-write")
    try:
        _unsigned(g).put_object(Bucket=pub, Key="new", Body=b"written")
        assert g.client().get_object(Bucket=pub, Key="new")["Body"].read() == b"written"
        with pytest.raises(ClientError) as ei:
            _unsigned(g).put_object(Bucket=private, Key="new", Body=b"x")
        assert ei.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        g.stop()


def test_size_settings_take_units(samba):
    """--io-size 1MiB and SMBGATE_SEGMENT_SIZE="2 MiB" are sizes (before,
    only plain bytes parsed); a word is refused with an example."""
    r, _ = _run([*_smb_args(samba), *KEYS, "--io-size", "eight"])
    assert r.returncode == 2 and "8MiB" in r.stderr, r.stderr
    g = Gateway(samba, "--io-size", "1MiB", env={"SMBGATE_SEGMENT_SIZE": "2 MiB",
                                                 "SMBGATE_READ_AHEAD_BUDGET": "64MiB"})
    try:
        s3 = g.client()
        b = f"units-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=b)
        body = os.urandom(5 << 20)
        s3.put_object(Bucket=b, Key="k", Body=body)
        assert s3.get_object(Bucket=b, Key="k")["Body"].read() == body
    finally:
        g.stop()


@pytest.mark.parametrize("how", ["file", "value"])
def test_a_blank_metrics_token_is_refused(samba, tmp_path, how):
    """A blank metrics token would serve /metrics to anyone while the
    operator believes it protected: startup refuses it, naming the setting
    (issue 23, point 6.5). Leaving the setting out is how to go without one."""
    blank = tmp_path / "metrics.token"
    write_secret(blank, "\n  \n")
    setting = ["--metrics-token-file", str(blank)] if how == "file" else ["--metrics-token", " "]
    r, _ = _run([*_smb_args(samba), *KEYS, "--metrics-listen", f"127.0.0.1:{_free_port()}", *setting])
    _assert_one_line_failure(r, "--metrics-token-file" if how == "file" else "--metrics-token", "empty")


def test_a_secret_file_every_user_may_read_is_refused_as_root(samba, tmp_path):
    """Issue 23, point 6.6: run as root (as here), the gateway refuses a
    secret file that every user may read, as ssh refuses such a key, in one
    line naming the setting and the mode; a group may read it (0640, the
    deployment's files)."""
    assert os.geteuid() == 0, "the end-to-end tests run as root"
    pw = write_secret(tmp_path / "smb.password", samba.env["SMB_PASSWORD"] + "\n")
    pw.chmod(0o644)
    args = ["--share", f"smb://127.0.0.1:{samba.port}/{samba.env['SMB_SHARE']}",
            "--smb-user", samba.env["SMB_USER"], "--smb-password-file", str(pw), *KEYS]
    r, _ = _run(args)
    _assert_one_line_failure(r, "--smb-password-file", "every user may read", "mode 644", "chmod o-rwx")
    pw.chmod(0o640)
    port = _free_port()
    g = subprocess.Popen([smbgate_bin(), "serve", *args, "--listen", f"127.0.0.1:{port}"], env=_base_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and g.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        assert g.poll() is None, g.stderr.read()
    finally:
        g.terminate()
        g.wait(timeout=10)


def test_no_smb_user_against_a_server_that_requires_signing_says_to_set_one():
    # Issue 25, point 4: a guest logon cannot sign; the error says what to set.
    from conftest import Samba
    s = Samba("--signing", "mandatory")
    try:
        r, _ = _run(["--share", f"smb://127.0.0.1:{s.port}/{s.env['SMB_SHARE']}", *KEYS])
        _assert_one_line_failure(r, "requires signing", "--smb-user", "--smb-password-file")
    finally:
        s.stop()


def test_no_share_is_one_line_naming_both_places():
    # --share is no required flag (a config file may give it), so its absence
    # is explained by smbgate itself.
    r, took = _run(KEYS)
    _assert_one_line_failure(r, "no share", "--share", "config file")
    assert took < STARTUP_TIMEOUT


def test_serve_help_groups_its_flags_and_names_the_log_setting():
    r = subprocess.run([smbgate_bin(), "serve", "--help"], env=_base_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    headings = [ln.rstrip(":") for ln in r.stdout.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert headings == ["Options", "HTTP and TLS", "Operations (metrics, health, access log)", "SMB", "S3",
                        "Data path", "Limits"], r.stdout
    assert r.stdout.splitlines()[2] == "Usage: smbgate serve [OPTIONS]"
    assert "SMBGATE_LOG" in r.stdout


def _notify_socket(tmp_path):
    """A datagram socket standing in for systemd's $NOTIFY_SOCKET."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(tmp_path / "notify.sock"))
    s.settimeout(10)
    return s


def _states(sock):
    return sock.recv(4096).decode().split("\n")


def test_systemd_hears_ready_once_serving_then_reloading_and_stopping(samba, tmp_path):
    sock = _notify_socket(tmp_path)
    g = Gateway(samba, env={"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
    try:
        assert "READY=1" in _states(sock)
        # Ready means serving: the health probe on the S3 port answers 200.
        with socket.create_connection(("127.0.0.1", g.port), timeout=5) as c:
            c.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.0 200")
        g.proc.send_signal(signal.SIGHUP)
        assert "RELOADING=1" in _states(sock)
        assert "READY=1" in _states(sock)
        g.proc.terminate()
        assert "STOPPING=1" in _states(sock)
        assert g.proc.wait(timeout=30) == 0
    finally:
        g.stop()


def test_systemd_never_hears_ready_from_a_failed_start(samba, tmp_path):
    sock = _notify_socket(tmp_path)
    sock.settimeout(0.5)
    r, _ = _run(_smb_args(samba, password="wrong") + KEYS, env={"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
    assert r.returncode != 0
    with pytest.raises(socket.timeout):
        sock.recv(4096)


def _sighup_lines(g, count=1, timeout=10):
    """The gateway's log lines that start with "SIGHUP", once `count` are in."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [l for l in open(g.log.name).read().splitlines() if "SIGHUP" in l]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_sighup_always_says_what_it_reloaded_or_that_there_was_nothing(samba, tmp_path):
    """Issue 43, item 6: with no config file, TLS or access log file, a
    SIGHUP said nothing at all, as if it had been missed; nor with a config
    file whose users it does not read again. Each says so now."""
    g = Gateway(samba, env={"SMBGATE_LOG": "info"})
    try:
        g.proc.send_signal(signal.SIGHUP)
        lines = _sighup_lines(g)
        assert len(lines) == 1 and "INFO" in lines[0], lines
        assert "SIGHUP: nothing to reload" in lines[0], lines
    finally:
        g.stop()
    # A config file without users (unsigned requests only): its users are
    # not read again, and the line says why.
    cfg = tmp_path / "anon.toml"
    cfg.write_text("anonymous = true\n")
    g = Gateway(samba, env={"SMBGATE_LOG": "info", "SMBGATE_CONFIG": str(cfg), "SMBGATE_ACCESS_KEY": None,
                            "SMBGATE_SECRET_KEY": None})
    try:
        g.proc.send_signal(signal.SIGHUP)
        lines = _sighup_lines(g)
        assert len(lines) == 1 and "config file's users not read again" in lines[0], lines
    finally:
        g.stop()
    # With an access log: what it reloaded, and nothing more.
    g = Gateway(samba, env={"SMBGATE_LOG": "info", "SMBGATE_ACCESS_LOG": str(tmp_path / "a.log")})
    try:
        g.proc.send_signal(signal.SIGHUP)
        lines = _sighup_lines(g)
        time.sleep(0.3)
        assert [l.split("SIGHUP: ")[1] for l in _sighup_lines(g)] == ["access log reopened"], lines
    finally:
        g.stop()


def test_a_disabled_account_is_named_as_refused_not_as_a_wrong_password():
    """Issue 38, point 1: a logon the server refused is one kind, for
    startup as for users' pools. A disabled account was "SMB server ...:
    STATUS_ACCOUNT_DISABLED" at startup (another set of statuses than the
    users' pools used); it is now named as a refused logon."""
    import subprocess
    from conftest import Samba
    s = Samba("--user", "s3locked:locked-pw")
    try:
        conf = f"{s.env['SMB_DIR']}/smb.conf"
        subprocess.run(["smbpasswd", "-c", conf, "-d", "s3locked"], check=True, capture_output=True)
        r, _ = _run(["--share", f"smb://127.0.0.1:{s.port}/{s.env['SMB_SHARE']}", "--smb-user", "s3locked",
                     "--smb-password", "locked-pw", *KEYS])
        line = _assert_one_line_failure(r)
        assert line == (f'smbgate: SMB login to 127.0.0.1:{s.port} as "s3locked" failed: the server refuses '
                        "this account's logon (STATUS_ACCOUNT_DISABLED)"), line
    finally:
        s.stop()
