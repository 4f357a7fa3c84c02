"""CopyObject while someone on the share cuts the source short: the
server-side copy (COPYCHUNK) then reads past the source's end and fails.
The answer must be 503 (the source changed; retry), or 200 with the
whole old object if the copy ended first (or the cut one, if the cut came
before the copy looked at its source): never the server's error as a
500, never a mix. The same race, one share operation at a time, runs on
the in-memory share in store/writes/server_copy_test.rs."""

import hashlib
import os
import threading
import time

from botocore.exceptions import ClientError

SIZE = 192 << 20


def test_a_source_cut_short_during_a_copy_is_a_503_or_the_old_object(s3, bucket, samba):
    body = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="src", Body=body)
    on_disk = samba.share_path / bucket / "src"
    answers = []
    for i in range(6):
        # Put the whole source back, then cut it at a moment that moves
        # through the copy's span from round to round.
        if os.path.getsize(on_disk) != SIZE:
            s3.put_object(Bucket=bucket, Key="src", Body=body)
        got = {}

        def copy():
            try:
                s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
                got["status"] = 200
            except ClientError as e:
                got["status"] = e.response["ResponseMetadata"]["HTTPStatusCode"]
                got["code"] = e.response["Error"]["Code"]

        t = threading.Thread(target=copy)
        t.start()
        time.sleep(0.02 * i)
        os.truncate(on_disk, 1 << 20)
        t.join(60)
        answers.append((got.get("status"), got.get("code")))
        assert got["status"] in (200, 503), answers
        answers[-1] += (os.path.getsize(on_disk),)
        if got["status"] == 200:
            dst = s3.get_object(Bucket=bucket, Key="dst")["Body"].read()
            whole = hashlib.md5(body).digest()
            cut = hashlib.md5(body[: 1 << 20]).digest()
            assert hashlib.md5(dst).digest() in (whole, cut), (answers, len(dst))
