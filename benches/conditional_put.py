"""Cost of conditional writes: sequential 4 KiB PUTs of new keys through
one gateway, unconditional against If-None-Match: *, and overwrites with
If-Match against plain overwrites, in interleaved batches so that drift in
the machine's speed hits both alike. Prints requests per second (median of
the batches) per kind.

    SMBGATE_BIN=target/release/smbgate .venv/bin/python benches/conditional_put.py [BATCHES] [PER_BATCH]
"""

import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from conftest import Gateway, Samba  # noqa: E402

BATCHES = int(sys.argv[1]) if len(sys.argv) > 1 else 5
PER = int(sys.argv[2]) if len(sys.argv) > 2 else 100


def main():
    samba = Samba()
    gw = Gateway(samba)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="bench-cond")
        body = os.urandom(4096)
        rates = {"PUT new key": [], "PUT new key, If-None-Match: *": [],
                 "overwrite": [], "overwrite, If-Match": []}
        keys = [f"o-{i}" for i in range(PER)]
        etags = {k: s3.put_object(Bucket="bench-cond", Key=k, Body=body)["ETag"] for k in keys}
        for _ in range(BATCHES):
            for kind in rates:
                t = time.perf_counter()
                for i in range(PER):
                    if kind == "PUT new key":
                        s3.put_object(Bucket="bench-cond", Key=f"n-{uuid.uuid4().hex}", Body=body)
                    elif kind == "PUT new key, If-None-Match: *":
                        s3.put_object(Bucket="bench-cond", Key=f"n-{uuid.uuid4().hex}", Body=body, IfNoneMatch="*")
                    elif kind == "overwrite":
                        etags[keys[i]] = s3.put_object(Bucket="bench-cond", Key=keys[i], Body=body)["ETag"]
                    else:
                        etags[keys[i]] = s3.put_object(Bucket="bench-cond", Key=keys[i], Body=body,
                                                       IfMatch=etags[keys[i]])["ETag"]
                rates[kind].append(PER / (time.perf_counter() - t))
        for kind, r in rates.items():
            print(f"{kind:32s} {statistics.median(r):7.0f} req/s  (min {min(r):.0f}, max {max(r):.0f})")
    finally:
        gw.stop()
        samba.stop()


if __name__ == "__main__":
    main()
