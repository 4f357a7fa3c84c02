"""DOS device names round-trip exactly (issue 11, item 26): `CON.txt`,
`com1`, `nul.tar.gz` and the like are stored under a name with a private-use
mark after the base (`CON\\uF02A.txt`), which Windows accepts and Samba never
lists under an 8.3 alias, so listings show exactly the keys written. Run on
the test server's defaults and with each `mangled names` setting."""

import pytest

from conftest import gateway_on_share_option

KEYS = ["CON.txt", "com1", "nul.tar.gz", "Lpt9.log", "aux.", "dir/PRN/x", "prn/CON", "CONSOLE.txt"]


@pytest.fixture(scope="module", params=["default", "mangled names = yes", "mangled names = no"])
def dgw(request):
    yield from gateway_on_share_option(request.param)


def test_device_names_round_trip_in_listings_and_reads(dgw):
    s3 = dgw.client()
    s3.create_bucket(Bucket="dev")
    for i, k in enumerate(KEYS):
        s3.put_object(Bucket="dev", Key=k, Body=f"{i}:{k}".encode())
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket="dev")["Contents"]]
    assert listed == sorted(KEYS, key=lambda k: k.encode()), listed
    for i, k in enumerate(KEYS):
        assert s3.get_object(Bucket="dev", Key=k)["Body"].read() == f"{i}:{k}".encode()
    top = s3.list_objects_v2(Bucket="dev", Delimiter="/")
    assert [p["Prefix"] for p in top.get("CommonPrefixes", [])] == ["dir/", "prn/"]
    # On the share: the mark after the base, nothing else changed.
    names = sorted(p.name for p in (dgw.samba.share_path / "dev").iterdir())
    assert "CON\uf02a.txt" in names and "com1\uf02a" in names and "nul\uf02a.tar.gz" in names, names
    assert "CONSOLE.txt" in names, names
    s3.delete_object(Bucket="dev", Key="CON.txt")
    assert "CON.txt" not in [o["Key"] for o in s3.list_objects_v2(Bucket="dev")["Contents"]]


def test_a_literal_device_mark_in_a_key_is_refused(dgw):
    s3 = dgw.client()
    s3.create_bucket(Bucket="devmark")
    from s3util import expect_error
    expect_error(400, "InvalidArgument", s3.put_object, Bucket="devmark", Key="CON\uf02a.txt", Body=b"x")
