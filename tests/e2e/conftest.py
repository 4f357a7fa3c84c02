"""Fixtures for end-to-end tests: a throwaway Samba (scripts/samba-test-server)
and an smbgate (release or debug build, SMBGATE_BIN) in front of it, plus
boto3 and CLI helpers. Every test talks to real peers over loopback."""

import os
import shlex
import socket
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY = "AKIDSMBGATETEST"
SECRET_KEY = "smbgate-test-secret-key"
REGION = "us-east-1"
# CLI tools installed next to this interpreter (the test venv).
BIN = Path(sys.executable).parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smbgate_bin():
    explicit = os.environ.get("SMBGATE_BIN")
    if explicit:
        return os.path.abspath(explicit)  # tests may run it from another directory
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("release", "debug"):
        p = target / profile / "smbgate"
        if p.exists():
            return str(p)
    raise RuntimeError("smbgate binary not found: run cargo build -p smbgate first")


def write_secret(path, text):
    """Writes a secret file as an operator should (mode 0600): the gateway,
    running as root here, refuses one every user may read."""
    path.write_text(text)
    path.chmod(0o600)
    return path


def gateway_on_share_option(option):
    """Yields a gateway on a Samba server of its own whose share has
    `option` (an smb.conf line) set, or the test server's defaults for
    "default"; stops both after. For module fixtures parametrized by share
    options."""
    samba = Samba(*([] if option == "default" else ["--share-option", option]))
    gw = Gateway(samba)
    yield gw
    gw.stop()
    samba.stop()


def put_on_share(samba, bucket, name, data):
    """Writes `bucket`/`name` straight onto the share, owned by the share's
    user as if written over SMB (so a PUT through a gateway may replace it).
    Returns its path."""
    d = samba.share_path / bucket
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    st = samba.share_path.stat()
    for p in (d, d / name):
        os.chown(p, st.st_uid, st.st_gid)
    return d / name


def open_handles(samba, name):
    """Lines of `smbstatus -L` (files open on the server) that name `name`."""
    conf = os.path.join(samba.env["SMB_DIR"], "smb.conf")
    out = subprocess.run(["smbstatus", "-s", conf, "-L"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if name in line]


def share_options_from_env():
    """`--share-option` arguments for SMBGATE_TEST_SHARE_OPTIONS."""
    return [a for o in os.environ.get("SMBGATE_TEST_SHARE_OPTIONS", "").split(";") if o.strip()
            for a in ("--share-option", o.strip())]


def parse_env_lines(out):
    """The NAME=value lines a server script prints (shell-quoted values)."""
    env = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        env[k] = shlex.split(v)[0] if v else ""
    return env


class Samba:
    def __init__(self, *args):
        # SMBGATE_TEST_SHARE_OPTIONS ("opt = v; opt2 = v2") runs every test
        # that does not choose its own share options on another kind of
        # share, e.g. "ea support = no" (sidecar records).
        extra = [] if "--share-option" in args else share_options_from_env()
        out = subprocess.run(
            [str(ROOT / "scripts/samba-test-server"), "start", *extra, *args],
            check=True, capture_output=True, text=True,
        ).stdout
        self.env = parse_env_lines(out)
        self.port = int(self.env["SMB_PORT"])
        self.share_path = Path(self.env["SMB_SHARE_PATH"])

    def smbclient(self, cmd, check=True):
        """Runs smbclient commands against the share; returns stdout. With
        `check` False, a command that fails is no error, and what it
        printed on stderr is returned too."""
        r = subprocess.run(
            ["smbclient", f"//127.0.0.1/{self.env['SMB_SHARE']}", "-p", str(self.port), "-m", "SMB3",
             "-U", f"{self.env['SMB_USER']}%{self.env['SMB_PASSWORD']}", "-c", cmd],
            capture_output=True, text=True,
        )
        if not check:
            return r.stdout + r.stderr
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def stop(self):
        subprocess.run([str(ROOT / "scripts/samba-test-server"), "stop", self.env["SMB_DIR"]],
                       capture_output=True)


class Gateway:
    def __init__(self, samba, *extra, env=None, listen_host="127.0.0.1"):
        """`listen_host` is the address it listens on with its port (one
        that also takes 127.0.0.1, such as `[::]`)."""
        self.samba = samba
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        e = dict(os.environ)
        e.update({
            "SMBGATE_LISTEN": f"{listen_host}:{self.port}",
            "SMBGATE_SHARE": f"smb://{samba.env.get('SMB_HOST', '127.0.0.1')}:{samba.port}/{samba.env['SMB_SHARE']}",
            "SMBGATE_SMB_USER": samba.env["SMB_USER"],
            "SMBGATE_SMB_PASSWORD": samba.env["SMB_PASSWORD"],
            "SMBGATE_ACCESS_KEY": ACCESS_KEY,
            "SMBGATE_SECRET_KEY": SECRET_KEY,
            "SMBGATE_POOL_SIZE": "4",
            # SMBGATE_TEST_LOG sets the gateways' log filter (to measure
            # something in their logs, with SMBGATE_TEST_LOG_DIR to keep them).
            "SMBGATE_LOG": os.environ.get("SMBGATE_TEST_LOG", "warn"),
        })
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)  # unset: the binary's default
            else:
                e[k] = v
        self.log = open(samba.share_path.parent / f"smbgate-{self.port}.log", "w")
        self.proc = subprocess.Popen([smbgate_bin(), "serve", *extra], env=e, stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"smbgate exited: {Path(self.log.name).read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("smbgate did not start")

    def client(self, access_key=ACCESS_KEY, secret_key=SECRET_KEY, **cfg):
        # One attempt: botocore's max_attempts counts retries, so a test
        # with it could pass on a retried 5xx.
        cfg.setdefault("retries", {"total_max_attempts": 1})
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=access_key, aws_secret_access_key=secret_key,
            config=Config(s3={"addressing_style": "path"}, **cfg),
        )

    def aws_env(self):
        e = dict(os.environ)
        e.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                  "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": "/dev/null",
                  "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"})
        return e

    def aws(self, *args, check=True):
        """Runs `aws --endpoint-url ... ARGS`; returns the CompletedProcess."""
        r = subprocess.run([str(BIN / "aws"), "--endpoint-url", self.endpoint, *args], env=self.aws_env(),
                           capture_output=True, text=True, timeout=300)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=35)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        keep = os.environ.get("SMBGATE_TEST_LOG_DIR")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log.name, Path(keep) / Path(self.log.name).name)


def balanced_pair(samba_a, samba_b, workdir, env=None):
    """Yields (a, b, lb): smbgate a on `samba_a`, b on `samba_b` (pool of 8,
    access logs in `workdir`, at `.access_log`), and HAProxy over both;
    stops them after."""
    gws = []
    for name, samba in (("a", samba_a), ("b", samba_b)):
        log = Path(workdir) / f"{name}.jsonl"
        g = Gateway(samba, env=dict(env or {}, SMBGATE_POOL_SIZE="8", SMBGATE_ACCESS_LOG=str(log)))
        g.access_log = log
        gws.append(g)
    lb = HAProxy(gws, workdir)
    yield gws[0], gws[1], lb
    lb.stop()
    for g in gws:
        g.stop()


class HAProxy:
    """HAProxy on loopback in front of `gateways`, round-robin per request,
    with the health probe docs/deployment.md's example uses (HEAD /)."""

    def __init__(self, gateways, workdir, server_opts=""):
        """`server_opts` go on every `server` line (`send-proxy-v2 source
        127.0.0.9`, say)."""
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        servers = "\n".join(f"    server gw{i} 127.0.0.1:{g.port} check inter 1s {server_opts}"
                            for i, g in enumerate(gateways))
        cfg = Path(workdir) / f"haproxy-{self.port}.cfg"
        cfg.write_text(f"""global
    maxconn 2000
defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
frontend s3
    bind 127.0.0.1:{self.port}
    default_backend smbgate
backend smbgate
    balance roundrobin
    option httpchk HEAD /
    http-check expect status 200
{servers}
""")
        self.log = open(cfg.with_suffix(".log"), "w")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while time.time() < deadline:
            assert self.proc.poll() is None, cfg.with_suffix(".log").read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        # Both servers up in HAProxy's checks before the first request.
        time.sleep(1.5)

    client = Gateway.client

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def samba():
    s = Samba()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def own_samba():
    """A Samba for one test module alone, for tests that look at what is on
    the share (temp files, open handles) or start gateways of their own."""
    s = Samba()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def gateway(samba):
    g = Gateway(samba)
    yield g
    g.stop()


@pytest.fixture
def s3(gateway):
    return gateway.client()


@pytest.fixture
def bucket(s3):
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
