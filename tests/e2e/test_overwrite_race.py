"""Overwrites under readers (issue 10, point 2; failure class 13): while 16
writers overwrite one key with 1-4 MiB bodies, 16 readers GET and HEAD it
in a loop. The key exists the whole time, so every 404 is spurious, and
every body must be one whole written version with its own ETag.

`SMBGATE_RACE_SECONDS` sets how long the readers run (10 by default; the
issue's trial ran 30)."""

import hashlib
import os
import random
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import Gateway

MIB = 1 << 20
WRITERS = 16
READERS = 16
SECONDS = float(os.environ.get("SMBGATE_RACE_SECONDS", "10"))


@pytest.fixture(scope="module")
def rgw(own_samba):
    g = Gateway(own_samba, env={"SMBGATE_LOG": "warn,smbgate::store=debug"})
    yield g
    g.stop()


def test_overwrites_never_show_readers_a_404_or_a_torn_body(rgw, own_samba):
    overwrite_race(rgw, own_samba.share_path, SECONDS)


def overwrite_race(rgw, share_path, seconds, versioned=False):
    """Runs the race through `rgw` (anything with `.client()`) for `seconds`
    and asserts what the module docstring says; `share_path` is the share's
    root on disk. With `versioned`, on a bucket with versioning enabled.
    Returns the counts of requests, and the bucket's name as "bucket"."""
    s3 = rgw.client()
    bucket = f"race-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    if versioned:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    key = "hot/key.bin"
    rng = random.Random(7)
    # A few distinct bodies per writer, reused: what matters is the
    # renames, not the bytes.
    bodies = [f"version {i}\n".encode() + rng.randbytes(rng.randint(1 * MIB, 4 * MIB)) for i in range(WRITERS * 2)]
    md5s = {hashlib.md5(b).hexdigest() for b in bodies}
    s3.put_object(Bucket=bucket, Key=key, Body=bodies[0])

    stop = threading.Event()
    lock = threading.Lock()
    counts = {"get": 0, "head": 0, "put": 0, "404": 0}
    errors = []

    def note(msg):
        with lock:
            if len(errors) < 20:
                errors.append(msg)

    def writer(w):
        c = rgw.client()
        i = w
        while not stop.is_set():
            b = bodies[i % len(bodies)]
            i += WRITERS
            try:
                r = c.put_object(Bucket=bucket, Key=key, Body=b)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                note(f"writer {w}: PUT failed: {e!r}")
                continue
            if r["ETag"] != '"%s"' % hashlib.md5(b).hexdigest():
                note(f"writer {w}: PUT ETag {r['ETag']} is not the body's MD5")
            with lock:
                counts["put"] += 1

    def reader(i):
        c = rgw.client()
        n = 0
        while not stop.is_set():
            n += 1
            head = n % 4 == 0
            try:
                if head:
                    c.head_object(Bucket=bucket, Key=key)
                    with lock:
                        counts["head"] += 1
                    continue
                r = c.get_object(Bucket=bucket, Key=key)
                data = r["Body"].read()
            except ClientError as e:
                status = e.response["ResponseMetadata"]["HTTPStatusCode"]
                if status == 404:
                    with lock:
                        counts["404"] += 1
                note(f"reader {i}: {'HEAD' if head else 'GET'} answered {status} {e.response['Error'].get('Code')}")
                continue
            except Exception as e:  # noqa: BLE001
                note(f"reader {i}: GET failed: {e!r}")
                continue
            with lock:
                counts["get"] += 1
            h = hashlib.md5(data).hexdigest()
            if h not in md5s:
                note(f"reader {i}: {len(data)} bytes match no written version (torn), ETag {r['ETag']}")
            elif r["ETag"] != f'"{h}"':
                note(f"reader {i}: ETag {r['ETag']} is not the body's MD5 {h}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "race threads did not finish"
    print(f"overwrite race: {counts}")
    assert errors == [], "\n".join(errors) + f"\n{counts}"
    assert counts["404"] == 0
    assert counts["get"] >= READERS and counts["put"] >= WRITERS, counts
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert hashlib.md5(data).hexdigest() in md5s
    assert (share_path / bucket / "hot" / "key.bin").read_bytes() == data
    return {**counts, "bucket": bucket}
