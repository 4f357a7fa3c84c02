"""Readers during If-Match overwrites (issue 10, point 2; failure class 25):
an If-Match PUT swaps versions by renaming the old one aside and the new
one in, two steps between which the key is absent on the share. Readers
that meet that moment wait for the swap (its creation lock is held) and
see the old version or the new one, never a 404."""

import os
import threading
import time

from botocore.exceptions import ClientError

from conftest import Gateway

SECONDS = float(os.environ.get("SMBGATE_RACE_SECONDS", "12"))


def test_readers_never_see_a_404_while_if_match_puts_swap_the_key(own_samba):
    gws = [Gateway(own_samba), Gateway(own_samba)]
    try:
        s3 = gws[0].client()
        bucket = "cas-readers"
        s3.create_bucket(Bucket=bucket)
        key = "state.json"
        bodies = [os.urandom(64 * 1024) for _ in range(4)]
        s3.put_object(Bucket=bucket, Key=key, Body=bodies[0])
        stop = threading.Event()
        lock = threading.Lock()
        seen = {"swaps": 0, "reads": 0}
        errors = []

        def note(msg):
            with lock:
                if len(errors) < 20:
                    errors.append(msg)

        def writer(g, w):
            c = g.client()
            i = w
            while not stop.is_set():
                try:
                    etag = c.head_object(Bucket=bucket, Key=key)["ETag"]
                    c.put_object(Bucket=bucket, Key=key, Body=bodies[i % len(bodies)], IfMatch=etag)
                    with lock:
                        seen["swaps"] += 1
                except ClientError as e:
                    if e.response["Error"]["Code"] != "PreconditionFailed":
                        note(f"writer {w}: {e.response['Error']['Code']}")
                i += 1

        def reader(g, r):
            c = g.client()
            while not stop.is_set():
                try:
                    if r % 2:
                        c.head_object(Bucket=bucket, Key=key)
                    else:
                        assert c.get_object(Bucket=bucket, Key=key)["Body"].read() in bodies
                    with lock:
                        seen["reads"] += 1
                except ClientError as e:
                    note(f"reader {r}: {'HEAD' if r % 2 else 'GET'} {e.response['Error']['Code']}")

        threads = [threading.Thread(target=writer, args=(gws[w % 2], w)) for w in range(6)]
        threads += [threading.Thread(target=reader, args=(gws[r % 2], r)) for r in range(10)]
        for t in threads:
            t.start()
        # At least SECONDS, and on until enough swaps and reads met (a
        # loaded machine gets there later; the cap only ends a stuck run).
        started = time.monotonic()
        time.sleep(SECONDS)
        while (seen["swaps"] <= 20 or seen["reads"] <= 100) and time.monotonic() - started < 20 * SECONDS:
            time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        print("if-match readers:", seen)
        assert seen["swaps"] > 20 and seen["reads"] > 100, seen
        assert errors == []
    finally:
        for g in gws:
            g.stop()
