"""8.3 short aliases never act on the long-named file (issue 23, 6.9).

A server that makes 8.3 aliases opens `LONGFI~1.TXT` as `Long File
Name.txt`; Samba does so on a case-insensitive share (its default). Under
an alias key the gateway reads nothing, deletes nothing and lists nothing of
the long-named file, whether the file has the gateway's record or was put
there by someone else. On a case-sensitive share (where Samba does not
resolve aliases) the same checks run for every key shaped like a short name,
and real names of that shape still round-trip."""

import re

import pytest

from conftest import gateway_on_share_option, put_on_share
from s3util import expect_error, status


@pytest.fixture(scope="module", params=["default", "case sensitive = yes"])
def agw(request):
    yield from gateway_on_share_option(request.param)


def alias_of(samba, bucket, name):
    out = samba.smbclient(f'allinfo "{bucket}/{name}"')
    m = re.search(r"altname:\s*(\S+)", out)
    assert m, out
    assert m.group(1) != name
    return m.group(1)


def test_an_alias_key_never_reaches_the_long_named_file(agw):
    s3, samba = agw.client(), agw.samba
    s3.create_bucket(Bucket="alias")
    s3.put_object(Bucket="alias", Key="Long File Name.txt", Body=b"ours")
    put_on_share(samba, "alias", "Made On Share.txt", b"theirs")
    s3.put_object(Bucket="alias", Key="Program Files/readme.txt", Body=b"inside")
    for long_name, body in [("Long File Name.txt", b"ours"), ("Made On Share.txt", b"theirs")]:
        alias = alias_of(samba, "alias", long_name)
        expect_error(404, "NoSuchKey", s3.get_object, Bucket="alias", Key=alias)
        expect_error(404, "404", s3.head_object, Bucket="alias", Key=alias)
        expect_error(404, "NoSuchKey", s3.copy_object, Bucket="alias", Key="copy",
                     CopySource={"Bucket": "alias", "Key": alias})
        assert status(s3.delete_object(Bucket="alias", Key=alias)) == 204
        assert s3.delete_objects(Bucket="alias", Delete={"Objects": [{"Key": alias}]})["Deleted"] == [{"Key": alias}]
        assert s3.get_object(Bucket="alias", Key=long_name)["Body"].read() == body
    folder = alias_of(samba, "alias", "Program Files")
    expect_error(404, "NoSuchKey", s3.get_object, Bucket="alias", Key=f"{folder}/readme.txt")
    assert status(s3.delete_object(Bucket="alias", Key=f"{folder}/readme.txt")) == 204
    assert s3.list_objects_v2(Bucket="alias", Prefix=f"{folder}/").get("Contents") is None
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="alias")["Contents"]) == [
        "Long File Name.txt", "Made On Share.txt", "Program Files/readme.txt"]
    assert s3.get_object(Bucket="alias", Key="Program Files/readme.txt")["Body"].read() == b"inside"


def test_a_put_under_an_alias_leaves_the_long_named_file(agw):
    s3, samba = agw.client(), agw.samba
    s3.create_bucket(Bucket="aliasput")
    s3.put_object(Bucket="aliasput", Key="Another Long Name.txt", Body=b"kept")
    alias = alias_of(samba, "aliasput", "Another Long Name.txt")
    try:
        s3.put_object(Bucket="aliasput", Key=alias, Body=b"new")
        # Only a server that does not resolve aliases stores it apart.
        assert s3.get_object(Bucket="aliasput", Key=alias)["Body"].read() == b"new"
    except Exception as e:  # noqa: BLE001 (the S3 error is checked below)
        assert e.response["Error"]["Code"] == "KeyConflict", e.response
    assert s3.get_object(Bucket="aliasput", Key="Another Long Name.txt")["Body"].read() == b"kept"


def test_real_names_shaped_like_aliases_round_trip(agw):
    s3 = agw.client()
    s3.create_bucket(Bucket="shaped")
    keys = ["ABC~1.TXT", "DIR~2/X~9", "Q~Z"]
    for k in keys:
        s3.put_object(Bucket="shaped", Key=k, Body=k.encode())
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="shaped")["Contents"]] == sorted(keys)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="shaped", Prefix="DIR~2/")["Contents"]] == ["DIR~2/X~9"]
    for k in keys:
        assert s3.get_object(Bucket="shaped", Key=k)["Body"].read() == k.encode()
        assert s3.head_object(Bucket="shaped", Key=k)["ContentLength"] == len(k)
        assert status(s3.delete_object(Bucket="shaped", Key=k)) == 204
    assert s3.list_objects_v2(Bucket="shaped").get("Contents") is None


def test_deleting_a_folder_marker_under_another_spelling_leaves_it(agw):
    """A key ending in `/` is a directory with a marker record: DELETE of
    its 8.3 alias, or (on a case-insensitive share) of another case, must
    not remove the marker or its directory."""
    s3, samba = agw.client(), agw.samba
    s3.create_bucket(Bucket="aliasdir")
    s3.put_object(Bucket="aliasdir", Key="Long Folder Name/", Body=b"")
    alias = alias_of(samba, "aliasdir", "Long Folder Name")
    for other in [f"{alias}/", "long folder name/"]:
        assert status(s3.delete_object(Bucket="aliasdir", Key=other)) == 204
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="aliasdir")["Contents"]] == ["Long Folder Name/"], other
        assert s3.head_object(Bucket="aliasdir", Key="Long Folder Name/")["ContentLength"] == 0
    assert status(s3.delete_object(Bucket="aliasdir", Key="Long Folder Name/")) == 204
    assert s3.list_objects_v2(Bucket="aliasdir").get("Contents") is None
