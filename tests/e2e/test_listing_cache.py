"""Paging reuses directory listings read for earlier pages, but never hides
a write made through the gateway between pages."""


def test_write_between_pages_is_listed(s3, bucket):
    for k in ("a", "b", "c"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    p1 = s3.list_objects_v2(Bucket=bucket, MaxKeys=2)
    assert [o["Key"] for o in p1["Contents"]] == ["a", "b"]
    s3.put_object(Bucket=bucket, Key="d", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="c")
    p2 = s3.list_objects_v2(Bucket=bucket, MaxKeys=2, ContinuationToken=p1["NextContinuationToken"])
    assert [o["Key"] for o in p2["Contents"]] == ["d"]
    assert p2["IsTruncated"] is False


def test_paging_a_large_directory_is_exact(s3, bucket, samba):
    d = samba.share_path / bucket
    names = sorted(f"k{i:05d}" for i in range(2500))
    for n in names:
        (d / n).write_bytes(b"")
    seen, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=bucket, MaxKeys=1000, **kw)
        seen += [o["Key"] for o in page.get("Contents", [])]
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    assert seen == names
