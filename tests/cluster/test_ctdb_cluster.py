"""The races, the multipart upload and the listing of the two-instance
tests (tests/e2e), with each smbgate on its own node of a two-node CTDB
cluster and HAProxy over both (issue 10, point 5). They ask of CTDB's
clustered locking.tdb what they ask of one smbd: share modes across nodes
(the If-Match lock, the exclusive conditional DELETE), the creation lock's
create-if-absent, and renames that handles on the other node see."""

import os
import uuid

import pytest

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

