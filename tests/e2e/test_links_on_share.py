"""Issue 23, 6.9: symbolic links on the share never lead one bucket into
another. Samba follows a link on the server and shows it as the file or
directory it points to, so the gateway cannot tell one apart; the share
setting `follow symlinks = no` (docs/nas-setup.md) hides them. A reparse
point the server does show (FILE_ATTRIBUTE_REPARSE_POINT, as Windows does
for links and junctions) is left out of listings by the gateway itself, and
a link the server leaves to the client (STATUS_STOPPED_ON_SYMLINK) is
never followed: both are no object."""

import os
import uuid

import pytest

from conftest import Gateway, Samba
from s3util import expect_error


@pytest.fixture
def unfollowing():
    s = Samba("--share-option", "follow symlinks = no")
    g = Gateway(s)
    yield s, g
    g.stop()
    s.stop()


def test_a_link_into_another_bucket_is_no_object_when_the_share_does_not_follow_links(unfollowing):
    samba, g = unfollowing
    s3 = g.client()
    a, b = f"a-{uuid.uuid4().hex[:10]}", f"b-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=a)
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="secret.txt", Body=b"secret")
    s3.put_object(Bucket=a, Key="plain.txt", Body=b"mine")
    os.symlink(f"../{b}/secret.txt", samba.share_path / a / "link.txt")
    os.symlink(f"../{b}", samba.share_path / a / "dirlink")

    listed = s3.list_objects_v2(Bucket=a)
    assert [o["Key"] for o in listed["Contents"]] == ["plain.txt"]
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=a, Key="link.txt")
    expect_error(404, "NoSuchKey", s3.get_object, Bucket=a, Key="dirlink/secret.txt")
    expect_error(404, "NoSuchKey", s3.copy_object, Bucket=a, Key="copy", CopySource={"Bucket": a, "Key": "link.txt"})
    s3.delete_object(Bucket=a, Key="dirlink/secret.txt")
    assert s3.get_object(Bucket=b, Key="secret.txt")["Body"].read() == b"secret"

    # Samba neither shows nor replaces the hidden link: a PUT to its name
    # is refused with a clear conflict, and what it points to is untouched.
    expect_error(409, "KeyConflict", s3.put_object, Bucket=a, Key="link.txt", Body=b"new")
    assert os.path.islink(samba.share_path / a / "link.txt")
    assert s3.get_object(Bucket=b, Key="secret.txt")["Body"].read() == b"secret"
    assert (samba.share_path / b / "secret.txt").read_bytes() == b"secret"
    # Nothing of the refused PUT is left behind.
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=a)["Contents"]] == ["plain.txt"]
