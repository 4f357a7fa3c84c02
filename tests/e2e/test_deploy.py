"""Deployment files (issue 12, point 5): the systemd unit passes
`systemd-analyze verify`, its settings file names only real settings, and
`smbgate --version` names the commit it was built from."""

import os
import re
import shutil
import subprocess
import time

import pytest
from pathlib import Path

from conftest import ROOT, smbgate_bin, write_secret


def test_version_names_the_commit():
    out = subprocess.run([smbgate_bin(), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    m = re.fullmatch(r"smbgate (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}|unknown)(-modified)?\)", out)
    assert m, out
    if head:
        assert m.group(2) == head, (out, head)


def test_a_second_build_with_no_change_compiles_nothing(tmp_path):
    """A fresh checkout whose files are newer than git's index: the first
    build's `git status` must not rewrite .git/index (which build.rs
    watches), or every later build would compile smbgate again (issue 25,
    point 5). smbgate's build.rs runs in a crate of its own with no
    dependencies, in a git repository and target directory of its own: a
    build in the project's target directory from another checkout shares
    the artifacts' places with the project's and left them stale (a later
    build of the project could then miss its own uncommitted changes)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    shutil.copy(ROOT / "crates/smbgate/build.rs", probe / "build.rs")
    (probe / "Cargo.toml").write_text(
        '[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\nbuild = "build.rs"\n\n'
        '[lib]\npath = "lib.rs"\n\n[workspace]\n')
    (probe / "lib.rs").write_text('pub const COMMIT: &str = env!("SMBGATE_GIT_COMMIT");\n')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "probe"]):
        subprocess.run(git + args, cwd=probe, check=True)
    # A file whose time differs from what the index recorded: git status
    # would refresh the index (and rewrite it) if asked to.
    os.utime(probe / "lib.rs", (1_600_000_000, 1_600_000_000))
    env = dict(os.environ, CARGO_TARGET_DIR=str(tmp_path / "target"))
    build = ["cargo", "build", "-v"]
    first = subprocess.run(build, cwd=probe, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run(build, cwd=probe, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Running `" not in second.stderr, \
        "the second build ran a compiler or build script:\n" + second.stderr[-2000:]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_systemd_unit_verifies(tmp_path):
    unit = (ROOT / "deploy" / "smbgate.service").read_text()
    assert "ExecStart=/usr/local/bin/smbgate serve" in unit
    # The unit as installed, pointing at the binary under test.
    (tmp_path / "smbgate.service").write_text(unit.replace("/usr/local/bin/smbgate", os.path.abspath(smbgate_bin())))
    r = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "smbgate.service")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


def test_the_example_environment_names_real_settings():
    help_text = subprocess.run([smbgate_bin(), "serve", "--help"], capture_output=True, text=True).stdout
    for line in (ROOT / "deploy" / "smbgate.env").read_text().splitlines():
        line = line.strip().lstrip("#")
        if line.startswith("SMBGATE_") and "=" in line:
            name = line.split("=", 1)[0]
            assert f"[env: {name}=" in help_text or name == "SMBGATE_LOG", f"{name} is no setting of smbgate serve"


def test_the_example_config_file_checks(tmp_path):
    # The example names secret files beside it; give them stand-ins.
    example = (ROOT / "deploy" / "smbgate.toml").read_text()
    (tmp_path / "smbgate.toml").write_text(example)
    for name in re.findall(r'_file = "([^"]+)"', example):
        write_secret(tmp_path / name, "stand-in\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    r = subprocess.run([smbgate_bin(), "config", "check", str(tmp_path / "smbgate.toml")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "# users: 3" in r.stdout and "auditor: access key AKIAAUDITOREXAMPLE" in r.stdout, r.stdout
    assert "stand-in" not in r.stdout


def test_the_example_config_file_listens_on_all_addresses_only_with_tls():
    """Issue 43, item 6: deploy/smbgate.toml listened on 0.0.0.0 in plain
    HTTP, so a copy of it served S3 unencrypted to the network. Plain HTTP
    stays on loopback; every address only with TLS."""
    import ipaddress
    import tomllib
    example = tomllib.loads((ROOT / "deploy" / "smbgate.toml").read_text())
    host = example.get("listen", "127.0.0.1:9000").rsplit(":", 1)[0].strip("[]")
    tls = "tls_cert" in example or "tls-cert" in example
    assert ipaddress.ip_address(host).is_loopback or tls, example.get("listen")


def test_the_example_config_file_checks_without_its_secrets():
    """`config check --without-secrets` checks the shipped file as it is, its
    secret files absent; without the flag the first missing one is named."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    example = ROOT / "deploy" / "smbgate.toml"
    r = subprocess.run([smbgate_bin(), "config", "check", "--without-secrets", str(example)], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "# secret files were named, not read (--without-secrets)" in r.stdout
    assert "# users: 3" in r.stdout and "auditor: access key AKIAAUDITOREXAMPLE" in r.stdout, r.stdout
    r = subprocess.run([smbgate_bin(), "config", "check", str(example)], env=env, capture_output=True, text=True)
    assert r.returncode == 1
    assert "smb.password" in r.stderr and "cannot read" in r.stderr, r.stderr


def test_the_haproxy_example_checks_and_is_the_one_the_docs_show():
    r = subprocess.run(["haproxy", "-c", "-f", str(ROOT / "deploy" / "haproxy.cfg")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    config = [l.split("#")[0].rstrip() for l in (ROOT / "deploy" / "haproxy.cfg").read_text().splitlines()]
    config = [l for l in config if l.strip()]
    doc = (ROOT / "docs" / "deployment.md").read_text()
    block = doc.split("```\ndefaults\n", 1)[1].split("```", 1)[0]
    shown = ["defaults"] + [l.rstrip() for l in block.splitlines() if l.strip()]
    assert shown == config


def test_the_container_healthcheck_follows_the_smb_side(gateway):
    import json
    line = next(l for l in (ROOT / "deploy" / "Containerfile").read_text().splitlines()
                if l.startswith("HEALTHCHECK"))
    cmd = json.loads(line.split(" CMD ", 1)[1])
    env = dict(os.environ, SMBGATE_LISTEN=f"127.0.0.1:{gateway.port}")
    assert subprocess.run(cmd, env=env, timeout=10).returncode == 0
    from conftest import _free_port
    env = dict(os.environ, SMBGATE_LISTEN=f"127.0.0.1:{_free_port()}")  # nothing listens
    assert subprocess.run(cmd, env=env, timeout=10, stderr=subprocess.DEVNULL).returncode != 0


def healthcheck_command():
    import json
    line = next(l for l in (ROOT / "deploy" / "Containerfile").read_text().splitlines()
                if l.startswith("HEALTHCHECK"))
    return json.loads(line.split(" CMD ", 1)[1])


def test_the_container_healthcheck_works_when_tls_is_on(tmp_path):
    """Issue 43, item 6: the HEALTHCHECK spoke plain HTTP to the S3 port,
    so with TLS on every check failed and the container was never healthy.
    Run by hand against a TLS instance, as the container would: healthy
    while the SMB side is up (HEAD / 200), unhealthy once it is gone (503)."""
    from conftest import Gateway, Samba
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out",
                    "tls.pem", "-days", "2", "-subj", "/CN=smbgate.example", "-addext",
                    "subjectAltName=DNS:smbgate.example"], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "tls.key").chmod(0o600)
    samba = Samba()
    g = Gateway(samba, env={"SMBGATE_TLS_CERT": str(tmp_path / "tls.pem"),
                            "SMBGATE_TLS_KEY": str(tmp_path / "tls.key")})
    try:
        # The image sets SMBGATE_LISTEN=0.0.0.0:9000; TLS may come from the
        # environment or from a config file the command cannot read.
        env = dict(os.environ, SMBGATE_LISTEN=f"0.0.0.0:{g.port}")
        env.pop("SMBGATE_TLS_CERT", None)
        assert subprocess.run(healthcheck_command(), env=env, timeout=10).returncode == 0
        samba.stop()
        deadline = time.time() + 30
        while subprocess.run(healthcheck_command(), env=env, timeout=10, stderr=subprocess.DEVNULL).returncode == 0:
            assert time.time() < deadline, "healthy with the SMB server gone"
            time.sleep(0.5)
    finally:
        g.stop()
        samba.stop()


def test_the_container_secret_file_recipe_lets_uid_10001_read_them_and_nobody_else(tmp_path):
    """Issue 43, item 6: the recipe in docs/deployment.md for secrets
    mounted into the container must leave every file under /etc/smbgate
    (a tls/ folder included) readable by UID/GID 10001, the image's user,
    through the folders too, and by nobody else. Run on a copy of such a
    folder, made as an operator would (root's, 0700 and 0600), then
    `smbgate config check` as 10001 reads every secret and the TLS key."""
    import re
    import tempfile
    doc = (ROOT / "docs" / "deployment.md").read_text()
    recipe = [b for b in re.findall(r"```sh\n(.*?)```", doc, re.S) if "10001" in b and "chmod" in b]
    assert len(recipe) == 1, recipe
    base = Path(tempfile.mkdtemp(prefix="smbgate-etc-"))
    base.chmod(0o755)  # as /etc is
    etc = base / "smbgate"
    try:
        (etc / "tls").mkdir(parents=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out",
                        "fullchain.pem", "-days", "2", "-subj", "/CN=s3.example"], cwd=etc / "tls", check=True,
                       capture_output=True)
        for name, text in [("smb.password", "pw\n"), ("s3.secret", "sk\n"), ("alice.s3.secret", "ask\n")]:
            (etc / name).write_text(text)
        (etc / "smbgate.toml").write_text(
            'share = "smb://nas.example.com/data"\nsmb_user = "svc"\nsmb_password_file = "smb.password"\n'
            'access_key = "AK"\nsecret_key_file = "s3.secret"\ntls_cert = "tls/fullchain.pem"\n'
            'tls_key = "tls/key.pem"\n[users.alice]\naccess_key = "AKALICE"\n'
            'secret_key_file = "alice.s3.secret"\nbuckets = ["alice"]\n')
        for p in [etc, etc / "tls"]:
            p.chmod(0o700)
        for p in etc.rglob("*"):
            if p.is_file():
                p.chmod(0o600)
        r = subprocess.run(["sh", "-ec", recipe[0].replace("/etc/smbgate", str(etc))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        as_user = lambda uid, *cmd: subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd],
            capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        r = as_user(10001, smbgate_bin(), "config", "check", str(etc / "smbgate.toml"))
        assert r.returncode == 0, r.stderr
        assert "# users: 2" in r.stdout, r.stdout
        # Nobody else: another user and group read no file, nor list the folder.
        for p in [etc / "smb.password", etc / "tls" / "key.pem", etc / "smbgate.toml"]:
            assert as_user(10002, "cat", str(p)).returncode != 0, p
            assert p.stat().st_mode & 0o007 == 0, p
        assert as_user(10002, "ls", str(etc)).returncode != 0
    finally:
        shutil.rmtree(base)


def test_the_license_file_is_the_license_cargo_names():
    assert 'license = "Apache-2.0"' in (ROOT / "Cargo.toml").read_text()
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_rust_version_is_what_the_locked_dependencies_need():
    # Issue 25, point 5: Cargo.toml's rust-version is the newest any locked
    # dependency declares (s3s 0.14.1 needs 1.92); a lower one promises a
    # build that fails. (The workspace itself was checked with that
    # toolchain: cargo +1.92 check --workspace --all-targets --locked.)
    import json
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked"], cwd=ROOT,
                                     capture_output=True, text=True, check=True, timeout=120).stdout)
    key = lambda v: (tuple(int(x) for x in v.split(".")) + (0, 0))[:3]
    ours = {p["rust_version"] for p in meta["packages"] if p["id"] in meta["workspace_members"]}
    assert len(ours) == 1, ours
    needed = max((p["rust_version"] for p in meta["packages"] if p.get("rust_version")), key=key)
    assert key(ours.pop()) == key(needed), needed


def test_the_docs_links_resolve_and_the_readme_lists_every_page():
    """The README points to every page under docs/, and every relative link
    in the README and the docs names a file (and, with #, a heading) that
    exists."""
    import re
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    readme = pages[0].read_text()
    for page in pages[1:]:
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"

    def anchors(path):
        heads = [l.lstrip("#").strip() for l in path.read_text().splitlines() if l.startswith("#")]
        return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}

    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name} links {target}: no such file"
            if anchor:
                assert anchor in anchors(file), f"{page.name} links {target}: no such heading"
