"""Files other people put on the share (no metadata record of ours) list,
HEAD and GET with one stable ETag, marked as not an MD5."""

import hashlib
import os


def test_foreign_file_etag_is_stable_and_consistent(s3, bucket, samba, tmp_path):
    d = samba.share_path / bucket / "from-explorer"
    d.mkdir()
    body = os.urandom(5000)
    (d / "report.bin").write_bytes(body)
    os.chown(d, samba.share_path.stat().st_uid, samba.share_path.stat().st_gid)
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == ["from-explorer/report.bin"]
    etag = listed[0]["ETag"]
    assert etag.endswith('-1"') and etag != '"%s"' % hashlib.md5(body).hexdigest()
    head = s3.head_object(Bucket=bucket, Key="from-explorer/report.bin")
    assert head["ETag"] == etag
    got = s3.get_object(Bucket=bucket, Key="from-explorer/report.bin")
    assert got["ETag"] == etag and got["Body"].read() == body
    # Stable across calls; changes when the file changes (over SMB, as
    # Explorer would change it; a change on the server's own disk is seen
    # within --cache-max-age, see test_object_cache.py).
    assert s3.list_objects_v2(Bucket=bucket)["Contents"][0]["ETag"] == etag
    os.chown(d / "report.bin", samba.share_path.stat().st_uid, samba.share_path.stat().st_gid)
    (tmp_path / "changed").write_bytes(body + b"more")
    samba.smbclient(f'put {tmp_path / "changed"} {bucket}/from-explorer/report.bin')
    assert (d / "report.bin").read_bytes() == body + b"more"
    assert s3.head_object(Bucket=bucket, Key="from-explorer/report.bin")["ETag"] != etag


def test_names_the_server_shows_only_as_8_3_aliases_are_not_listed(s3, bucket, samba):
    """Issue 25, point 3: a file whose real name SMB cannot carry (a `:`,
    made on a Samba share without `catia`) is listed by the server under a
    made-up 8.3 name only, which the exact-name check of every read refuses.
    Such a key is not listed (a listing shows only keys that open), with and
    without a delimiter, V1 and V2; a real name of the same shape is listed
    and reads."""
    from conftest import put_on_share
    put_on_share(samba, bucket, "de:tail.txt", b"colon")
    (samba.share_path / bucket / "dir:x").mkdir()
    put_on_share(samba, bucket, "dir:x/inside.txt", b"in a colon folder")
    s3.put_object(Bucket=bucket, Key="ABC~1.TXT", Body=b"a real short name")
    s3.put_object(Bucket=bucket, Key="plain.txt", Body=b"plain")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["ABC~1.TXT", "plain.txt"]
    assert [o["Key"] for o in s3.list_objects(Bucket=bucket)["Contents"]] == ["ABC~1.TXT", "plain.txt"]
    page = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert ([o["Key"] for o in page["Contents"]], page.get("CommonPrefixes")) == (["ABC~1.TXT", "plain.txt"], None)
    assert s3.get_object(Bucket=bucket, Key="ABC~1.TXT")["Body"].read() == b"a real short name"


def test_a_folder_made_on_the_share_stays_when_its_last_object_goes(s3, bucket, samba):
    """Issue 25, point 2: the gateway prunes only the directories it made
    for keys (marked by their CreationTime when it makes them). A folder
    someone made on the share stays after the last object put into it is
    deleted; the gateway's own directories still go."""
    samba.smbclient(f'mkdir "{bucket}\\made-on-share"')
    s3.put_object(Bucket=bucket, Key="made-on-share/doc.txt", Body=b"x")
    s3.put_object(Bucket=bucket, Key="ours/deep/doc.txt", Body=b"y")
    s3.delete_object(Bucket=bucket, Key="made-on-share/doc.txt")
    s3.delete_object(Bucket=bucket, Key="ours/deep/doc.txt")
    root = samba.share_path / bucket
    assert (root / "made-on-share").is_dir(), "a folder people made is theirs"
    assert not (root / "ours").exists(), "the gateway's own directories are pruned"


def _keys(page):
    return [(o["Key"], o["Size"]) for o in page.get("Contents", [])]


def test_an_empty_folder_made_on_the_share_is_the_object_name_slash(s3, bucket, samba):
    """Issue 25, point 2: an empty folder someone made is the 0-byte
    object `name/` (as the S3 console's folders are), the same in every
    listing: without a delimiter (V1 and V2, any prefix reaching it) it is
    that key; with `/` it is the common prefix `name/`. HEAD, GET, a
    conditional PUT and DELETE treat it as that object. With something in
    it, it is only a prefix; DELETE `name/` removes it while empty. A
    folder holding only a file no key can name is not empty, so not an
    object."""
    import pytest
    from botocore.exceptions import ClientError
    from conftest import put_on_share
    samba.smbclient(f'mkdir "{bucket}\\made-on-share"')
    s3.put_object(Bucket=bucket, Key="z.txt", Body=b"z")
    want = [("made-on-share/", 0), ("z.txt", 1)]
    assert _keys(s3.list_objects_v2(Bucket=bucket)) == want
    assert _keys(s3.list_objects(Bucket=bucket)) == want
    for prefix in ("made", "made-on-share", "made-on-share/"):
        assert _keys(s3.list_objects_v2(Bucket=bucket, Prefix=prefix)) == [("made-on-share/", 0)], prefix
    page = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert (_keys(page), page["CommonPrefixes"]) == ([("z.txt", 1)], [{"Prefix": "made-on-share/"}])
    page = s3.list_objects(Bucket=bucket, Delimiter="/")
    assert (_keys(page), page["CommonPrefixes"]) == ([("z.txt", 1)], [{"Prefix": "made-on-share/"}])
    page = s3.list_objects_v2(Bucket=bucket, Prefix="made-on-share/", Delimiter="/")
    assert (_keys(page), page.get("CommonPrefixes")) == ([("made-on-share/", 0)], None)
    # Paged one key at a time, it is met once.
    page = s3.list_objects_v2(Bucket=bucket, MaxKeys=1)
    assert (_keys(page), page["IsTruncated"]) == ([("made-on-share/", 0)], True)
    page = s3.list_objects_v2(Bucket=bucket, MaxKeys=1, ContinuationToken=page["NextContinuationToken"])
    assert (_keys(page), page["IsTruncated"]) == ([("z.txt", 1)], False)

    listed_etag = s3.list_objects_v2(Bucket=bucket)["Contents"][0]["ETag"]
    head = s3.head_object(Bucket=bucket, Key="made-on-share/")
    assert (head["ContentLength"], head["ETag"]) == (0, listed_etag)
    got = s3.get_object(Bucket=bucket, Key="made-on-share/")
    assert (got["Body"].read(), got["ETag"]) == (b"", listed_etag)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="made-on-share/", Body=b"", IfNoneMatch="*")
    assert e.value.response["Error"]["Code"] == "PreconditionFailed"

    # With an object in it, it is only the prefix of that object.
    s3.put_object(Bucket=bucket, Key="made-on-share/doc.txt", Body=b"x")
    assert _keys(s3.list_objects_v2(Bucket=bucket, Prefix="made")) == [("made-on-share/doc.txt", 1)]
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="made-on-share/")
    assert e.value.response["Error"]["Code"] == "404"
    s3.delete_object(Bucket=bucket, Key="made-on-share/doc.txt")
    assert _keys(s3.list_objects_v2(Bucket=bucket, Prefix="made")) == [("made-on-share/", 0)]

    s3.delete_object(Bucket=bucket, Key="made-on-share/")
    assert not (samba.share_path / bucket / "made-on-share").exists()
    assert _keys(s3.list_objects_v2(Bucket=bucket)) == [("z.txt", 1)]

    # Not empty, though nothing in it can be listed: no object.
    samba.smbclient(f'mkdir "{bucket}\\odd"')
    put_on_share(samba, bucket, "odd/de:tail.txt", b"colon")
    assert _keys(s3.list_objects_v2(Bucket=bucket)) == [("z.txt", 1)]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="odd/")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    s3.delete_object(Bucket=bucket, Key="odd/")
    assert (samba.share_path / bucket / "odd" / "de:tail.txt").exists(), "never a folder with something in it"
