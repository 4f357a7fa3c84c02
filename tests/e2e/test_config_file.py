"""The config file (issue 12, point 5): every `serve` setting can live in the
TOML file given by --config or SMBGATE_CONFIG, with flags over environment
over file over defaults, and `smbgate config check` validates a file and
prints the effective settings with secrets redacted."""

import os
import socket
import subprocess
import time

import boto3
import pytest
from botocore.config import Config

from conftest import ACCESS_KEY, REGION, SECRET_KEY, _free_port, smbgate_bin, write_secret


def clean_env(**extra):
    """The environment without any SMBGATE_ setting, plus `extra`."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    e.update(extra)
    return e


def file_settings(samba, port, **more):
    lines = [
        f'share = "smb://127.0.0.1:{samba.port}/{samba.env["SMB_SHARE"]}"',
        f'smb_user = "{samba.env["SMB_USER"]}"',
        f'smb-password = "{samba.env["SMB_PASSWORD"]}"',
        f'access_key = "{ACCESS_KEY}"',
        f'secret_key = "{SECRET_KEY}"',
        f'listen = "127.0.0.1:{port}"',
        "pool_size = 2",
        "smb_sign = true",
    ]
    lines += [f"{k} = {v}" for k, v in more.items()]
    return "\n".join(lines) + "\n"


def wait_listening(proc, port, log):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("not listening on %d: %s" % (port, log.read_text()))


def start(args, env, log):
    return subprocess.Popen([smbgate_bin(), "serve", *args], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=35)


def test_every_setting_can_come_from_the_file(own_samba, tmp_path):
    port = _free_port()
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(file_settings(own_samba, port, region='"eu-west-1"'))
    log = tmp_path / "log"
    p = start(["--config", str(cfg)], clean_env(), log)
    try:
        wait_listening(p, port, log)
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="eu-west-1",
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                          config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))
        s3.create_bucket(Bucket="from-file", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        s3.put_object(Bucket="from-file", Key="k", Body=b"configured")
        assert s3.get_object(Bucket="from-file", Key="k")["Body"].read() == b"configured"
        assert s3.head_bucket(Bucket="from-file")["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-region"] == \
            "eu-west-1"
    finally:
        stop(p)
    # Issue 23, point 6.6: the file holds secrets and every user may read it.
    warned = [l for l in log.read_text().splitlines() if "every user may read it" in l]
    assert len(warned) == 1 and "WARN" in warned[0] and "mode=\"644\"" in warned[0], log.read_text()
    assert SECRET_KEY not in log.read_text()


def test_a_config_file_only_its_owner_reads_is_not_warned_about(own_samba, tmp_path):
    port = _free_port()
    cfg = write_secret(tmp_path / "smbgate.toml", file_settings(own_samba, port))
    log = tmp_path / "log"
    p = start(["--config", str(cfg)], clean_env(), log)
    try:
        wait_listening(p, port, log)
    finally:
        stop(p)
    assert "every user may read" not in log.read_text()


def test_flags_override_the_environment_which_overrides_the_file(own_samba, tmp_path):
    file_port, env_port, flag_port = _free_port(), _free_port(), _free_port()
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(file_settings(own_samba, file_port))
    log = tmp_path / "log"
    # The environment beats the file.
    p = start([], clean_env(SMBGATE_CONFIG=str(cfg), SMBGATE_LISTEN=f"127.0.0.1:{env_port}"), log)
    try:
        wait_listening(p, env_port, log)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", file_port)) != 0
    finally:
        stop(p)
    # A flag beats both.
    p = start(["--listen", f"127.0.0.1:{flag_port}"],
              clean_env(SMBGATE_CONFIG=str(cfg), SMBGATE_LISTEN=f"127.0.0.1:{env_port}"), log)
    try:
        wait_listening(p, flag_port, log)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", env_port)) != 0
    finally:
        stop(p)


def run_serve(cfg, timeout=30):
    return subprocess.run([smbgate_bin(), "serve", "--config", str(cfg)], env=clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_an_unknown_setting_or_bad_toml_is_one_line_at_startup(tmp_path):
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text('share = "smb://127.0.0.1:1/s"\npool_sise = 4\n')
    r = run_serve(cfg)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f'smbgate: config file {cfg}: unknown setting "pool_sise" (settings are the flags of '
        "`smbgate serve --help`, e.g. pool_size = 8)"
    ], r.stderr
    cfg.write_text('share = "smb://127.0.0.1:1/s"\n\npool_size = [4]\n')
    r = run_serve(cfg)
    assert (r.returncode, r.stderr.splitlines()) == \
        (1, [f"smbgate: config file {cfg}: pool_size must be a string, number or boolean"]), r.stderr
    cfg.write_text('share = "smb://127.0.0.1:1/s"\npool_size = \n')
    r = run_serve(cfg)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"smbgate: config file {cfg}, line 2: "), r.stderr
    # A value the flag refuses gets the flag's own message.
    cfg.write_text('share = "smb://127.0.0.1:1/s"\nio_size = "lots"\n')
    r = run_serve(cfg)
    assert r.returncode == 2 and "invalid value 'lots' for '--io-size" in r.stderr, r.stderr
    missing = tmp_path / "missing.toml"
    r = run_serve(missing)
    assert (r.returncode, r.stderr.splitlines()) == \
        (1, [f"smbgate: config file {missing}: No such file or directory (os error 2)"]), r.stderr


def test_config_check_prints_the_effective_settings_without_secrets(tmp_path):
    cfg = tmp_path / "smbgate.toml"
    cfg.write_text(
        'share = "smb://nas.example/data"\nsmb_user = "gw"\nsmb_password = "hunter2-smb"\n'
        'secret_key = "hunter2-s3"\naccess_key = "AKGW"\npool-size = 3\n'
        '[users.ann]\naccess_key = "AKANN"\nsecret_key = "hunter2-ann"\nsmb_user = "ann"\n'
        'smb_password = "hunter2-annpw"\nbuckets = ["docs"]\nread_only = true\n'
    )
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], capture_output=True, text=True,
                       env=clean_env(SMBGATE_REGION="eu-central-1"), timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"# {cfg}: valid. Effective settings of `smbgate serve` (flags aside):"
    for want in [
        'share = "smb://nas.example/data"  # file',
        'pool_size = "3"  # file',
        'smb_password = "(redacted)"  # file',
        'secret_key = "(redacted)"  # file',
        'region = "eu-central-1"  # environment',
        'listen = "127.0.0.1:9000"  # default',
        "# users: 2",
        "#   AKGW: access key AKGW, as SMB the gateway's own --smb-user, all buckets",
        "#   ann: access key AKANN, as SMB ann, buckets docs, read-only",
    ]:
        assert want in lines, (want, r.stdout)
    assert "hunter2" not in r.stdout + r.stderr
    # A refused user fails the check with its reason.
    cfg.write_text(cfg.read_text().replace('buckets = ["docs"]', 'buckets = ["Not_A_Bucket"]'))
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], capture_output=True, text=True,
                       env=clean_env(), timeout=30)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.splitlines() == \
        [f'smbgate: config file {cfg}: [users.ann]: buckets: "Not_A_Bucket" is not a valid bucket name'], r.stderr


def test_relative_paths_come_from_the_files_directory_and_flags_beat_its_secret_files(own_samba, tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    write_secret(d / "smb.password", own_samba.env["SMB_PASSWORD"] + "\n")
    write_secret(d / "s3.secret", SECRET_KEY + "\n")
    port = _free_port()
    cfg = d / "smbgate.toml"
    cfg.write_text(
        f'share = "smb://127.0.0.1:{own_samba.port}/{own_samba.env["SMB_SHARE"]}"\n'
        f'smb_user = "{own_samba.env["SMB_USER"]}"\nsmb_password_file = "smb.password"\n'
        f'access_key = "{ACCESS_KEY}"\nsecret_key_file = "s3.secret"\nlisten = "127.0.0.1:{port}"\n'
    )
    log = tmp_path / "log"
    # Started from /, as systemd does: the files are found beside the config.
    p = subprocess.Popen([smbgate_bin(), "serve", "--config", str(cfg)], env=clean_env(), cwd="/",
                         stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_listening(p, port, log)
    finally:
        stop(p)
    # A password from a flag, or from the environment, beats the file's
    # password file (here it is wrong, so the login fails).
    for args, env in [(["--smb-password", "wrong-pw"], {}), ([], {"SMBGATE_SMB_PASSWORD": "wrong-pw"})]:
        r = subprocess.run([smbgate_bin(), "serve", "--config", str(cfg), *args], env=clean_env(**env), cwd="/",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "wrong user name or password" in r.stderr, (args, env, r.stderr)
    # Both in one place is refused.
    r = subprocess.run([smbgate_bin(), "serve", "--config", str(cfg), "--smb-password", "x",
                        "--smb-password-file", str(d / "smb.password")], env=clean_env(),
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr.strip()) == \
        (2, "smbgate: --smb-password and --smb-password-file are both given in the command line; give one")


def test_config_check_reports_what_serve_would_refuse(tmp_path):
    cfg = tmp_path / "smbgate.toml"
    check = lambda: subprocess.run([smbgate_bin(), "config", "check", str(cfg)], env=clean_env(),
                                   capture_output=True, text=True, timeout=30)
    cfg.write_text("pool_size = 3\n")
    r = check()
    assert r.returncode == 1 and "--share" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    cfg.write_text('share = "smb://h/s"\n[userz.a]\nx = 1\n')
    r = check()
    assert r.stderr.strip() == f"smbgate: config file {cfg}: unknown table [userz] (the file's tables are " \
                               "[users.NAME], [buckets.NAME] and [targets.NAME])", r.stderr
    cfg.write_text('share = "smb://h/s"\nsmb_password_file = "nope.pw"\n')
    r = check()
    assert r.returncode == 1 and f"--smb-password-file: cannot read {tmp_path / 'nope.pw'}" in r.stderr, r.stderr
    write_secret(tmp_path / "yes.pw", "hunter2\n")
    # (With S3 credentials: serve refuses a file without, and so does check.)
    cfg.write_text('share = "smb://h/s"\nsmb_password_file = "yes.pw"\naccess_key = "AK"\nsecret_key = "sk"\n')
    r = check()
    assert r.returncode == 0, r.stderr
    assert f'smb_password_file = "{tmp_path / "yes.pw"}"  # file' in r.stdout.splitlines()
    assert "# metrics_listen: not set" in r.stdout.splitlines()
    assert "hunter2" not in r.stdout
    cfg.write_text('share = "smb://gw:hunter2@h/s"\n')
    r = check()
    assert r.returncode == 1 and "must not carry credentials" in r.stderr and "hunter2" not in r.stderr, r.stderr


def test_config_check_shows_the_kerberos_settings(tmp_path):
    cfg = tmp_path / "smbgate.toml"
    keytab = tmp_path / "ann.keytab"
    keytab.write_bytes(b"\x05\x02")
    keytab.chmod(0o600)
    cfg.write_text(
        'share = "smb://fs1.corp.example/data"\nsmb_user = "svc"\nsmb_password = "hunter2-smb"\n'
        'smb_auth = "kerberos"\nsmb_realm = "CORP.EXAMPLE"\nsmb_kdc = "dc1.corp.example,dc2.corp.example:88"\n'
        'smb_spn = "cifs/fs1.corp.example"\naccess_key = "AKGW"\nsecret_key = "hunter2-s3"\n'
        '[users.ann]\naccess_key = "AKANN"\nsecret_key = "hunter2-ann"\nsmb_user = "ann"\n'
        'smb_keytab = "ann.keytab"\nbuckets = ["docs"]\n'
    )
    cfg.chmod(0o600)
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], capture_output=True, text=True,
                       env=clean_env(), timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for want in [
        'smb_auth = "kerberos"  # file',
        'smb_realm = "CORP.EXAMPLE"  # file',
        'smb_kdc = "dc1.corp.example,dc2.corp.example:88"  # file',
        'smb_spn = "cifs/fs1.corp.example"  # file',
        "# smb_keytab: not set",
        f"#   ann: access key AKANN, as SMB ann (Kerberos keytab {keytab}), buckets docs",
    ]:
        assert want in lines, (want, r.stdout)
    assert "hunter2" not in r.stdout + r.stderr


def config_check(cfg, **env):
    return subprocess.run([smbgate_bin(), "config", "check", str(cfg)], env=clean_env(**env),
                          capture_output=True, text=True, timeout=30)


def test_repeatable_settings_take_the_flags_name_and_a_toml_array(own_samba, tmp_path):
    """Issue 43, item 6: `trusted_proxy` and `anonymous_bucket` (the flags'
    own names) work in the file as well as the plural keys, and so does a
    TOML array beside a comma-separated string."""
    cfg = tmp_path / "smbgate.toml"
    base = 'share = "smb://h/s"\naccess_key = "AK"\nsecret_key = "sk"\nanonymous = true\nsmb_realm = "R.EXAMPLE"\n'
    for written in [
        'trusted_proxy = ["127.0.0.9", "127.0.0.10"]\nanonymous_bucket = ["pub", "docs"]\nsmb-kdc = ["k1", "k2:88"]\n',
        'trusted_proxies = "127.0.0.9,127.0.0.10"\nanonymous_buckets = "pub,docs"\nsmb_kdc = "k1,k2:88"\n',
        'trusted-proxy = "127.0.0.9,127.0.0.10"\nanonymous-bucket = ["pub,docs"]\nsmb_kdc = ["k1,k2:88"]\n',
    ]:
        cfg.write_text(base + written)
        r = config_check(cfg)
        assert r.returncode == 0, (written, r.stderr)
        for want in ['trusted_proxies = "127.0.0.9,127.0.0.10"  # file', 'anonymous_buckets = "pub,docs"  # file',
                     'smb_kdc = "k1,k2:88"  # file']:
            assert want in r.stdout.splitlines(), (written, want, r.stdout)
    # One setting under two names is refused; an array where one value goes too.
    cfg.write_text(base + 'trusted_proxy = "127.0.0.9"\ntrusted_proxies = "127.0.0.10"\n')
    r = config_check(cfg)
    assert (r.returncode, r.stderr.splitlines()) == (1, [
        f"smbgate: config file {cfg}: trusted_proxies and trusted_proxy are the same setting; give one"]), r.stderr
    cfg.write_text(base + 'trusted_proxy = [1.5, {}]\n')
    r = config_check(cfg)
    assert (r.returncode, r.stderr.splitlines()) == (1, [
        f"smbgate: config file {cfg}: trusted_proxy must be a string or an array of strings"]), r.stderr
    # serve believes the PROXY header of the proxies the array names.
    port = _free_port()
    cfg.write_text(file_settings(own_samba, port, trusted_proxy='["127.0.0.8", "127.0.0.9"]',
                                 proxy_protocol="true"))
    log = tmp_path / "log"
    p = start(["--config", str(cfg)], clean_env(), log)
    try:
        wait_listening(p, port, log)
        for proxy in ("127.0.0.8", "127.0.0.9"):
            s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(proxy, 0))
            s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 5000 9000\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200"), proxy
            s.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.7", 0))
        s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 5000 9000\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400"), "a proxy the file does not name is not believed"
        s.close()
    finally:
        stop(p)


def self_signed(d):
    """A certificate for 127.0.0.1 and its key (mode 0600) in `d`."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out",
                    "tls.pem", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   cwd=d, check=True, capture_output=True)
    (d / "tls.key").chmod(0o600)
    return d / "tls.pem", d / "tls.key"


def test_half_of_tls_in_the_file_is_refused_by_check_and_serve(own_samba, tmp_path):
    """Issue 43, item 6: tls_cert without tls_key (or the reverse) in the
    file served plain HTTP with no word; as flags clap refuses it. Now
    `config check` and `serve` refuse it with one line naming the file, and
    nothing listens."""
    self_signed(tmp_path)
    port = _free_port()
    cfg = tmp_path / "smbgate.toml"
    for half, needs in [('tls_cert = "tls.pem"', "tls_key"), ('tls-key = "tls.key"', "tls_cert"),
                        (f'listen_plain = "127.0.0.1:{_free_port()}"', "tls_key and tls_cert")]:
        cfg.write_text(file_settings(own_samba, port) + half + "\n")
        key = half.split(" ")[0]
        line = f"smbgate: config file {cfg}: {key} needs {needs} (give it in the file, the environment or as a flag)"
        r = config_check(cfg)
        assert (r.returncode, r.stdout, r.stderr.splitlines()) == (1, "", [line]), (half, r.stdout, r.stderr)
        r = run_serve(cfg)
        assert (r.returncode, r.stderr.splitlines()) == (1, [line]), (half, r.stderr)
    # The other half from the environment or a flag completes it: HTTPS.
    cfg.write_text(file_settings(own_samba, port) + 'tls_cert = "tls.pem"\n')
    assert config_check(cfg, SMBGATE_TLS_KEY=str(tmp_path / "tls.key")).returncode == 0
    log = tmp_path / "log"
    p = start(["--config", str(cfg), "--tls-key", str(tmp_path / "tls.key")], clean_env(), log)
    try:
        wait_listening(p, port, log)
        import ssl
        ctx = ssl.create_default_context(cafile=str(tmp_path / "tls.pem"))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert s.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        stop(p)


REFUSED_BY_SERVE = {
    "proxy protocol without trusted proxies": ('proxy_protocol = true\n',
        "--proxy-protocol: name the proxies whose PROXY headers to believe with --trusted-proxy"),
    "no S3 credentials": ('access_key = ""\n', "no S3 credentials: set --access-key"),
    "anonymous next to users without a grant": ('anonymous = true\n', "--anonymous next to S3 users: name"),
    "a grant without anonymous": ('anonymous_bucket = ["pub"]\n', "--anonymous-bucket and --anonymous-write need"),
    "a small XML body budget": ('xml_body_budget = "1MiB"\n', "--xml-body-budget must be at least 4 MiB"),
    "a domain that is no DNS name": ('domain = "not a domain"\n', '--domain "not a domain" is not a DNS name'),
    "KDCs without a realm": ('smb_kdc = ["dc1"]\n', "--smb-kdc needs --smb-realm"),
    "a blank metrics token": ('metrics_listen = "127.0.0.1:1"\nmetrics_token = " "\n',
        "--metrics-token is empty: /metrics would answer anyone"),
    "a bucket of bad name": ('[buckets.Bad_Name]\npath = "x"\n', "[buckets.Bad_Name]: not a valid bucket name"),
}


@pytest.mark.parametrize("case", REFUSED_BY_SERVE, ids=list(REFUSED_BY_SERVE))
def test_config_check_refuses_every_file_serve_refuses_with_the_same_line(tmp_path, case):
    """Issue 43, item 6: `config check` passed files that `serve` then
    refused (proxy_protocol without trusted proxies, ...). Every check of
    serve that needs no SMB server now runs in both, in one order."""
    extra, says = REFUSED_BY_SERVE[case]
    cfg = tmp_path / "smbgate.toml"
    # An SMB server nobody listens at: serve must refuse before it.
    base = 'share = "smb://127.0.0.1:1/s"\naccess_key = "AK"\nsecret_key = "sk"\n'
    if extra.startswith("access_key"):
        base = 'share = "smb://127.0.0.1:1/s"\n'
        extra = ""
    cfg.write_text(base + extra)
    checked = config_check(cfg)
    served = run_serve(cfg)
    assert served.returncode == 1 and len(served.stderr.splitlines()) == 1, served.stderr
    assert says in served.stderr, served.stderr
    assert (checked.returncode, checked.stdout, checked.stderr) == (1, "", served.stderr), checked.stdout
