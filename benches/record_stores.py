"""Cost of stream and sidecar records (shares without EAs) against EA
records: one gateway on a default share, one on `ea support = no` with
`vfs objects = streams_xattr`, and one on `ea support = no` alone,
sequential 4 KiB PUT, HEAD and GET of the same keys, and a listing of
them, in interleaved batches so that drift in the machine's speed hits
all alike. Prints requests per second (median of the batches) per kind.

    SMBGATE_BIN=target/release/smbgate .venv/bin/python benches/record_stores.py [BATCHES] [PER_BATCH]
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from conftest import Gateway, Samba  # noqa: E402

BATCHES = int(sys.argv[1]) if len(sys.argv) > 1 else 5
PER = int(sys.argv[2]) if len(sys.argv) > 2 else 100
KINDS = {
    "EA records": (),
    "stream records": ("--share-option", "ea support = no", "--share-option", "vfs objects = streams_xattr"),
    "sidecar records": ("--share-option", "ea support = no"),
}


def main():
    sambas = {k: Samba(*opts) for k, opts in KINDS.items()}
    gws = {k: Gateway(s) for k, s in sambas.items()}
    try:
        body = os.urandom(4096)
        clients = {k: g.client() for k, g in gws.items()}
        for s3 in clients.values():
            s3.create_bucket(Bucket="bench-rec")
        keys = [f"o-{i}" for i in range(PER)]
        ops = {
            "PUT (overwrite)": lambda s3, k: s3.put_object(Bucket="bench-rec", Key=k, Body=body),
            "HEAD": lambda s3, k: s3.head_object(Bucket="bench-rec", Key=k),
            "GET": lambda s3, k: s3.get_object(Bucket="bench-rec", Key=k)["Body"].read(),
        }
        rates = {(op, kind): [] for op in ops for kind in KINDS}
        lists = {kind: [] for kind in KINDS}
        for _ in range(BATCHES):
            for op, f in ops.items():
                for kind, s3 in clients.items():
                    t = time.perf_counter()
                    for k in keys:
                        f(s3, k)
                    rates[(op, kind)].append(PER / (time.perf_counter() - t))
            for kind, s3 in clients.items():
                t = time.perf_counter()
                n = s3.list_objects_v2(Bucket="bench-rec")["KeyCount"]
                assert n == PER, n
                lists[kind].append(time.perf_counter() - t)
        for (op, kind), r in rates.items():
            print(f"{op:16s} {kind:16s} {statistics.median(r):7.0f} req/s  (min {min(r):.0f}, max {max(r):.0f})")
        for kind, r in lists.items():
            print(f"{'LIST ' + str(PER):16s} {kind:16s} {statistics.median(r) * 1000:7.1f} ms     "
                  f"(min {min(r) * 1000:.1f}, max {max(r) * 1000:.1f})")
    finally:
        for g in gws.values():
            g.stop()
        for s in sambas.values():
            s.stop()


if __name__ == "__main__":
    main()
