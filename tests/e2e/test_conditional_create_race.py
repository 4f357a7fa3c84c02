"""If-None-Match: * under a race (failure class 25): of 20 clients that PUT
the same new key at once, exactly one wins (200) and the others get 412
PreconditionFailed; the share holds exactly the winner's bytes. Locking
tools (Terraform's S3 lockfile, Delta Lake and Iceberg commits) rely on it.
"""

import hashlib
import os

import pytest

from conftest import Gateway
from s3util import racing_puts


@pytest.fixture(scope="module")
def racegw(samba):
    # The default pool (8 connections): as many PUTs in flight as a user's.
    g = Gateway(samba, env={"SMBGATE_POOL_SIZE": "8"})
    yield g
    g.stop()


@pytest.mark.parametrize("size", [64 * 1024, 3 * 1024 * 1024])
def test_twenty_racing_if_none_match_puts_have_exactly_one_winner(racegw, samba, size):
    bucket = f"race-{size}"
    racegw.client().create_bucket(Bucket=bucket)
    clients = [racegw.client() for _ in range(20)]
    for round_ in range(5):
        key = f"lock-{round_}"
        bodies = [os.urandom(size) for _ in range(20)]

        results = racing_puts(clients, bucket, key, bodies, IfNoneMatch="*")
        winners = [i for i, st, _ in results if st == 200]
        losers = sorted((st, code) for _, st, code in results if st != 200)
        assert len(winners) == 1, (key, results)
        assert losers == [(412, "PreconditionFailed")] * 19, (key, results)
        want = hashlib.md5(bodies[winners[0]]).hexdigest()
        assert hashlib.md5((samba.share_path / bucket / key).read_bytes()).hexdigest() == want
        assert racegw.client().get_object(Bucket=bucket, Key=key)["ETag"] == f'"{want}"'
