"""The races, the multipart upload and the listing of the two-instance
tests (tests/e2e), with each smbgate on its own node of a two-node CTDB
cluster and HAProxy over both (issue 10, point 5). They ask of CTDB's
clustered locking.tdb what they ask of one smbd: share modes across nodes
(the If-Match lock, the exclusive conditional DELETE), the creation lock's
create-if-absent, and renames that handles on the other node see. One thing
did not hold as on one smbd; see the last test."""

import os
import uuid

import pytest

from s3util import racing_puts
from test_complete_conditions import race_once
from test_conditional_delete_race import (  # noqa: F401 (collected here)
    test_racing_conditional_puts_and_deletes_have_one_winner,
    test_twenty_racing_conditional_deletes_have_one_winner,
)
from test_two_instances import (  # noqa: F401 (collected here)
    test_a_listing_sees_what_the_other_instance_writes_between_pages,
    test_a_multipart_upload_whose_parts_go_to_both_instances,
    test_conditional_creates_through_both_instances_have_one_winner,
    test_if_match_through_both_instances_is_one_compare_and_swap,
    test_overwrites_through_both_instances_never_404_or_tear,
)


def test_the_instances_are_on_different_nodes(pair):
    a, b, _ = pair
    hosts = {g.samba.env["SMB_HOST"] for g in (a, b)}
    assert hosts == {"10.77.0.1", "10.77.0.2"}


@pytest.mark.parametrize("cond", ["IfNoneMatch", "IfMatch"])
def test_racing_conditional_completes_across_nodes_have_one_winner(pair, cond):
    lb = pair[2]
    s3 = lb.client()
    bucket = f"ctdb-complete-{cond.lower()}-{uuid.uuid4().hex[:6]}"
    s3.create_bucket(Bucket=bucket)
    clients = [lb.client() for _ in range(10)]
    for _ in range(int(os.environ.get("SMBGATE_RACE_ROUNDS", "10"))):
        race_once(clients, bucket, cond)


def test_if_match_across_nodes_holds_over_many_rounds(pair, own_samba):
    """40 rounds of 10 If-Match PUTs on a fresh small key, half through each
    node. On the cluster an open that waited on a sharing violation could
    come back with the file its path named when it began, renamed away
    since: before the pinning open checked its path, 2 winners showed in 1
    round of 40 or fewer, in 3 of 3 runs."""
    lb = pair[2]
    bucket = f"ctdb-cas-{uuid.uuid4().hex[:6]}"
    lb.client().create_bucket(Bucket=bucket)
    clients = [lb.client() for _ in range(10)]
    bad = []
    for round_ in range(int(os.environ.get("SMBGATE_RACE_ROUNDS", "40"))):
        key = f"k{round_}"
        etag = lb.client().put_object(Bucket=bucket, Key=key, Body=b"seed")["ETag"]
        bodies = [os.urandom(64 * 1024) for _ in range(10)]
        results = racing_puts(clients, bucket, key, bodies, IfMatch=etag)
        winners = [i for i, st, _ in results if st == 200]
        if len(winners) != 1 or sorted(st for _, st, _ in results if st != 200) != [412] * 9:
            bad.append((round_, results))
            continue
        assert (own_samba.share_path / bucket / key).read_bytes() == bodies[winners[0]]
    assert not bad, bad
