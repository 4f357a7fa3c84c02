"""Changes people make on the share as events (issue 40, point 2): one
elected instance watches each bucket with a notification configuration
(CHANGE_NOTIFY on its tree) and reports files made, changed, renamed and
removed through smbclient, folders with what is under them, and the
server's overflow by listing the bucket again; changes made through S3 are
reported once, by their request; two instances report each change once,
and the survivor takes over when the watcher dies."""

import re
import signal
import time
import urllib.request

import pytest

from conftest import Gateway, _free_port
from event_receiver import Receiver, config_file, new_configured_bucket, webhook_gateway, webhook_target

EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def watched(samba, receiver, gw, bucket):
    """Makes `bucket` with a configuration and waits until its watcher
    reports a file put through smbclient (sentinels put before the watch
    began are never reported); then waits until no more reports come, so
    that none is left to arrive later, and forgets what it got."""
    s3, _ = new_configured_bucket(gw, bucket, EVENTS)
    deadline = time.time() + 30
    n = 0
    sentinel = lambda: [r for r in receiver.records() if r["s3"]["object"]["key"].startswith("sentinel-")]  # noqa: E731
    while not sentinel():
        assert time.time() < deadline, "the bucket's watcher never reported a change"
        put_on_share(samba, f"{bucket}/sentinel-{n}", b"s")
        n += 1
        seen = time.time() + 5
        while time.time() < seen and not sentinel():
            time.sleep(0.05)
    # The watcher settles a change for a second before it reports it.
    while True:
        assert time.time() < deadline + 30, "the watcher's reports never stopped"
        count = len(receiver.records())
        time.sleep(2.5)
        if len(receiver.records()) == count:
            break
    receiver.got.clear()
    return s3


def put_on_share(samba, path, data):
    local = samba.share_path.parent / "upload.tmp"
    local.write_bytes(data)
    samba.smbclient(f'put "{local}" "{path}"')


def events(receiver, n, settle=2.5):
    """The first `n` records, after waiting `settle` seconds more for any
    that should not come."""
    receiver.wait_for(n)
    time.sleep(settle)
    return [(r["eventName"], r["s3"]["object"]["key"]) for r in receiver.records()]


@pytest.fixture
def watched_gateway(own_samba, receiver, tmp_path):
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    yield gw
    gw.stop()


def test_a_file_put_through_smbclient_is_one_created_event_with_what_a_get_gives(own_samba, receiver,
                                                                               watched_gateway):
    s3 = watched(own_samba, receiver, watched_gateway, "people")
    put_on_share(own_samba, "people/scan 1.pdf", b"%PDF" * 1000)
    assert events(receiver, 1) == [("ObjectCreated:Put", "scan+1.pdf")]
    record = receiver.records()[0]
    head = s3.head_object(Bucket="people", Key="scan 1.pdf")
    assert record["s3"]["object"]["size"] == 4000 == head["ContentLength"]
    assert record["s3"]["object"]["eTag"] == head["ETag"].strip('"')
    assert record["userIdentity"]["principalId"] == "share"

    receiver.got.clear()
    own_samba.smbclient('rename "people/scan 1.pdf" "people/scan 2.pdf"')
    assert sorted(events(receiver, 2)) == [("ObjectCreated:Put", "scan+2.pdf"), ("ObjectRemoved:Delete", "scan+1.pdf")]

    receiver.got.clear()
    put_on_share(own_samba, "people/scan 2.pdf", b"changed")
    own_samba.smbclient('del "people/sentinel-*"')
    got = events(receiver, 2)
    assert ("ObjectCreated:Put", "scan+2.pdf") in got
    assert [e for e in got if e[0] == "ObjectRemoved:Delete"] != []
    assert receiver.records()[got.index(("ObjectCreated:Put", "scan+2.pdf"))]["s3"]["object"]["size"] == 7


def test_changes_made_through_s3_are_reported_once(own_samba, receiver, watched_gateway):
    s3 = watched(own_samba, receiver, watched_gateway, "viaS3".lower())
    s3.put_object(Bucket="vias3", Key="dir/a", Body=b"from s3")
    s3.put_object(Bucket="vias3", Key="b", Body=b"from s3")
    s3.copy_object(Bucket="vias3", Key="c", CopySource={"Bucket": "vias3", "Key": "b"})
    # The watcher has looked at b before it goes (one settle time).
    time.sleep(2.5)
    s3.delete_object(Bucket="vias3", Key="b")
    assert events(receiver, 4, settle=4) == [
        ("ObjectCreated:Put", "dir/a"), ("ObjectCreated:Put", "b"), ("ObjectCreated:Copy", "c"),
        ("ObjectRemoved:Delete", "b")]
    principals = {r["userIdentity"]["principalId"] for r in receiver.records()}
    assert "share" not in principals


def test_folders_bring_and_take_their_keys(own_samba, receiver, watched_gateway):
    watched(own_samba, receiver, watched_gateway, "folders")
    own_samba.smbclient('mkdir "folders/in"; mkdir "folders/in/deep"')
    put_on_share(own_samba, "folders/in/a.txt", b"a")
    put_on_share(own_samba, "folders/in/deep/b.txt", b"bb")
    assert sorted(events(receiver, 2)) == [("ObjectCreated:Put", "in/a.txt"),
                                           ("ObjectCreated:Put", "in/deep/b.txt")]
    receiver.got.clear()
    own_samba.smbclient('deltree "folders/in"')
    assert sorted(events(receiver, 2)) == [("ObjectRemoved:Delete", "in/a.txt"),
                                           ("ObjectRemoved:Delete", "in/deep/b.txt")]


def test_a_thousand_files_dropped_at_once_are_a_thousand_events(own_samba, receiver, watched_gateway, tmp_path):
    watched(own_samba, receiver, watched_gateway, "drop")
    local = tmp_path / "drop"
    local.mkdir()
    # Long names, so that the changes overflow the server's buffer.
    names = [f"{i:04d}-" + "x" * 120 + ".dat" for i in range(1000)]
    for n in names:
        (local / n).write_bytes(n[:4].encode())
    # The gateway stopped while they arrive: the server keeps what changed
    # (more than one answer holds) and then answers STATUS_NOTIFY_ENUM_DIR,
    # so the bucket is listed again.
    watched_gateway.proc.send_signal(signal.SIGSTOP)
    try:
        own_samba.smbclient(f'cd drop; lcd "{local}"; prompt off; mput *')
    finally:
        watched_gateway.proc.send_signal(signal.SIGCONT)
    got = events(receiver, 1000, settle=3)
    assert sorted(k for _, k in got) == sorted(names)
    assert {e for e, _ in got} == {"ObjectCreated:Put"}
    etags = {r["s3"]["object"]["key"]: r["s3"]["object"]["eTag"] for r in receiver.records()}
    assert len(etags) == 1000


def test_two_instances_report_each_change_once_and_the_survivor_takes_over(own_samba, receiver, tmp_path):
    cfg = str(config_file(tmp_path, webhook_target(receiver.url)))
    ports = [_free_port(), _free_port()]
    a, b = (Gateway(own_samba, "--config", cfg, env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{p}"}) for p in ports)

    def watchers(port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            m = re.search(r"^smbgate_event_watchers (\d+)", r.read().decode(), re.M)
        return int(m.group(1))

    try:
        watched(own_samba, receiver, a, "pair")
        put_on_share(own_samba, "pair/one", b"1")
        assert events(receiver, 1, settle=4) == [("ObjectCreated:Put", "one")]
        # Each bucket with a configuration (earlier tests' too, on this
        # module's share) is watched by one instance.
        configured = len(list((own_samba.share_path / ".smbgate" / "notifications").iterdir()))
        assert sum(watchers(p) for p in ports) == configured
        # Kill both in turn's first: whichever watches, the other takes over.
        receiver.got.clear()
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        deadline = time.time() + 30
        n = 0
        while not receiver.got and time.time() < deadline:
            put_on_share(own_samba, f"pair/after-{n}", b"2")
            n += 1
            time.sleep(2)
        assert receiver.got, "no instance watched the bucket after one was killed"
        assert watchers(ports[1]) == configured
    finally:
        a.stop()
        b.stop()


def test_names_no_key_reaches_are_skipped(own_samba, receiver, watched_gateway):
    watched(own_samba, receiver, watched_gateway, "odd")
    put_on_share(own_samba, "odd/x y", b"1")
    assert events(receiver, 1, settle=0) == [("ObjectCreated:Put", "x+y")]
    receiver.got.clear()
    # U+F028 stands for a space only at a name's end: in the middle, the
    # key mapping never makes it, and the key "x y" is another file.
    put_on_share(own_samba, "odd/x\uf028y", b"22")
    put_on_share(own_samba, "odd/plain", b"y")
    assert events(receiver, 1) == [("ObjectCreated:Put", "plain")]
