"""Bucket notifications (issue 40, points 1 and 3): a configuration in
AWS's shape naming the operator's `[targets.NAME]`; one event per change
made through S3, in AWS's JSON, to a webhook (signed with HMAC-SHA256) or
to NATS (a real nats-server, JetStream acknowledgments); every event queued
on the share before the answer, so a target that was down, or a gateway
killed with events queued, loses none."""

import asyncio
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import botocore.exceptions
import pytest
import requests

from conftest import ACCESS_KEY, Gateway, _free_port, smbgate_bin
from event_receiver import (ARN, SECRET, Receiver, config_file, configure, new_configured_bucket, queued_on_share,
                            wait_until_nothing_queued, webhook_gateway, webhook_target)


def request_id(answer):
    return answer["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def test_each_change_made_through_s3_is_one_event_in_aws_shape(own_samba, receiver, tmp_path):
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    try:
        s3, configured = new_configured_bucket(
            gw, "evs", ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"])
        # As S3 does: a test event to the destination, for the request
        # that put the configuration.
        assert [(t["Service"], t["Event"], t["Bucket"]) for t in receiver.wait_for_test_event()] == [
            ("Amazon S3", "s3:TestEvent", "evs")]
        assert receiver.test_events[0]["RequestId"] == request_id(configured)
        put = s3.put_object(Bucket="evs", Key="dir/a b.txt", Body=b"hello")
        form = gw.client(signature_version="s3v4").generate_presigned_post("evs", "posted")
        r = requests.post(f"{gw.endpoint}/evs", data=form["fields"], files={"file": ("f", b"from a form")},
                          timeout=30)
        assert r.status_code == 204, r.text
        s3.copy_object(Bucket="evs", Key="copied", CopySource={"Bucket": "evs", "Key": "dir/a b.txt"})
        up = s3.create_multipart_upload(Bucket="evs", Key="mp")
        part = s3.upload_part(Bucket="evs", Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 100)
        done = s3.complete_multipart_upload(Bucket="evs", Key="mp", UploadId=up["UploadId"], MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        s3.put_object_tagging(Bucket="evs", Key="copied", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        s3.delete_object_tagging(Bucket="evs", Key="copied")
        deleted = s3.delete_object(Bucket="evs", Key="dir/a b.txt")
        s3.delete_objects(Bucket="evs", Delete={"Objects": [{"Key": "posted"}]})

        records = receiver.wait_for(8)
        assert [(r["eventName"], r["s3"]["object"]["key"]) for r in records] == [
            ("ObjectCreated:Put", "dir/a+b.txt"),
            ("ObjectCreated:Post", "posted"),
            ("ObjectCreated:Copy", "copied"),
            ("ObjectCreated:CompleteMultipartUpload", "mp"),
            ("ObjectTagging:Put", "copied"),
            ("ObjectTagging:Delete", "copied"),
            ("ObjectRemoved:Delete", "dir/a+b.txt"),
            ("ObjectRemoved:Delete", "posted"),
        ], records
        first = records[0]
        assert (first["eventVersion"], first["eventSource"], first["awsRegion"]) == ("2.1", "aws:s3", "us-east-1")
        assert first["s3"]["bucket"]["name"] == "evs"
        assert first["s3"]["object"]["size"] == 5
        assert first["s3"]["object"]["eTag"] == hashlib.md5(b"hello").hexdigest()
        assert first["userIdentity"]["principalId"] == ACCESS_KEY
        assert first["requestParameters"]["sourceIPAddress"] == "127.0.0.1"
        assert first["responseElements"]["x-amz-request-id"] == request_id(put)
        assert records[1]["s3"]["object"]["size"] == len(b"from a form")
        assert records[3]["s3"]["object"]["eTag"] == done["ETag"].strip('"')
        assert records[3]["s3"]["object"]["size"] == 100
        assert "size" not in records[6]["s3"]["object"]
        assert records[6]["responseElements"]["x-amz-request-id"] == request_id(deleted)
        # A sequencer per event, growing in the order they were made.
        seqs = [r["s3"]["object"]["sequencer"] for r in records]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        # Each message is signed: HMAC-SHA256 of the body.
        for headers, body in receiver.got:
            want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["x-smbgate-signature-256"] == want
            assert headers["content-type"] == "application/json"
        # Delivered: nothing stays queued on the share.
        assert wait_until_nothing_queued(own_samba) == []
    finally:
        gw.stop()


def test_config_check_lists_the_targets_without_their_secrets(tmp_path):
    cfg = config_file(tmp_path, 'share = "smb://nas.example/data"\naccess_key = "AK"\nsecret_key = "s3-secret"\n'
                                + webhook_target("https://hooks.example/in")
                                + '[targets.bus]\ntype = "nats"\nurl = "nats://nats.example:4222"\n'
                                  'subject = "s3.events"\nuser = "gw"\npassword = "nats-secret"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMBGATE_")}
    r = subprocess.run([smbgate_bin(), "config", "check", str(cfg)], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "# event targets: 2" in lines
    assert "#   bus: nats nats://nats.example:4222 subject s3.events, core NATS, as gw, queue_limit 10000" in lines
    assert "#   hooks: webhook https://hooks.example/in, signed, queue_limit 10000" in lines
    assert SECRET not in r.stdout and "nats-secret" not in r.stdout

    bad = config_file(tmp_path, 'share = "smb://nas.example/data"\naccess_key = "AK"\nsecret_key = "s"\n'
                                '[targets.bus]\ntype = "nats"\nurl = "nats://h:4222"\n')
    r = subprocess.run([smbgate_bin(), "config", "check", str(bad)], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode != 0
    assert r.stderr.strip() == f"smbgate: config file {bad}: [targets.bus]: subject is missing"


def test_the_configuration_reads_back_filters_keys_and_refuses_unknown_targets(own_samba, receiver, tmp_path):
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="cfg")
        got = s3.get_bucket_notification_configuration(Bucket="cfg")
        assert "QueueConfigurations" not in got and "TopicConfigurations" not in got
        with pytest.raises(botocore.exceptions.ClientError) as e:
            configure(s3, "cfg", ["s3:ObjectCreated:*"], arn="arn:smbgate:sqs::elsewhere")
        assert e.value.response["Error"]["Code"] == "InvalidArgument"
        assert e.value.response["Error"]["Message"] == "Unable to validate the following destination configurations"
        with pytest.raises(botocore.exceptions.ClientError) as e:
            configure(s3, "cfg", ["s3:ObjectMade:*"])
        assert e.value.response["Error"]["Code"] == "InvalidArgument"

        configure(s3, "cfg", ["s3:ObjectCreated:Put"], prefix="in/")
        q = s3.get_bucket_notification_configuration(Bucket="cfg")["QueueConfigurations"]
        assert len(q) == 1 and q[0]["Id"]
        assert (q[0]["QueueArn"], q[0]["Events"]) == (ARN, ["s3:ObjectCreated:Put"])
        assert q[0]["Filter"]["Key"]["FilterRules"] == [{"Name": "prefix", "Value": "in/"}]

        s3.put_object(Bucket="cfg", Key="out/skipped", Body=b"1")
        s3.put_object(Bucket="cfg", Key="in/sent", Body=b"2")
        s3.delete_object(Bucket="cfg", Key="in/sent")
        s3.put_object(Bucket="cfg", Key="in/last", Body=b"3")
        receiver.wait_for(2)
        time.sleep(0.5)
        assert [r["s3"]["object"]["key"] for r in receiver.records()] == ["in/sent", "in/last"]

        # An empty configuration turns notifications off.
        s3.put_bucket_notification_configuration(Bucket="cfg", NotificationConfiguration={})
        assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket="cfg")
        s3.put_object(Bucket="cfg", Key="in/after", Body=b"4")
        time.sleep(0.5)
        assert len(receiver.got) == 2
    finally:
        gw.stop()


def test_a_target_down_for_30_s_gets_every_event_afterwards_in_order(own_samba, tmp_path):
    port = _free_port()
    gw = webhook_gateway(own_samba, tmp_path, f"http://127.0.0.1:{port}/hook")
    receiver = None
    try:
        s3, _ = new_configured_bucket(gw, "down", ["s3:ObjectCreated:*"])
        for i in range(10):
            s3.put_object(Bucket="down", Key=f"k{i % 2}", Body=str(i).encode())
        # Nothing listens: every event waits on the share, for 30 s.
        assert len(queued_on_share(own_samba)) >= 9
        time.sleep(30)
        receiver = Receiver(port)
        # Retries back off to a pause of 30 s at most.
        records = receiver.wait_for(10, timeout=90)
        assert len(records) == 10
        for k in ("k0", "k1"):
            sizes = [r["s3"]["object"]["eTag"] for r in records if r["s3"]["object"]["key"] == k]
            want = [hashlib.md5(str(i).encode()).hexdigest() for i in range(10) if f"k{i % 2}" == k]
            assert sizes == want, "in the order the PUTs were made"
    finally:
        gw.stop()
        if receiver:
            receiver.stop()


def test_a_gateway_killed_with_events_queued_loses_none(own_samba, tmp_path):
    port = _free_port()
    cfg = config_file(tmp_path, webhook_target(f"http://127.0.0.1:{port}/hook"))
    a = Gateway(own_samba, "--config", str(cfg))
    s3, _ = new_configured_bucket(a, "killed", ["s3:ObjectCreated:*"])
    for i in range(5):
        s3.put_object(Bucket="killed", Key=f"k{i}", Body=b"x")
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()
    a.stop()
    receiver = Receiver(port)
    b = Gateway(own_samba, "--config", str(cfg))
    try:
        records = receiver.wait_for(5)
        assert sorted(r["s3"]["object"]["key"] for r in records) == [f"k{i}" for i in range(5)]
        assert wait_until_nothing_queued(own_samba) == []
    finally:
        b.stop()
        receiver.stop()


def test_an_event_a_webhook_refuses_for_good_is_dropped_not_retried_forever(own_samba, receiver, tmp_path):
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    try:
        s3, _ = new_configured_bucket(gw, "refused", ["s3:ObjectCreated:*"])
        receiver.wait_for_test_event()
        tried = receiver.tried
        deadline = time.time() + 10
        receiver.status = 400
        s3.put_object(Bucket="refused", Key="bad", Body=b"1")
        while receiver.tried == tried and time.time() < deadline:
            time.sleep(0.05)
        receiver.status = 200
        s3.put_object(Bucket="refused", Key="good", Body=b"2")
        records = receiver.wait_for(1)
        time.sleep(1)
        assert [r["s3"]["object"]["key"] for r in receiver.records()] == ["good"]
        assert receiver.tried == tried + 2, "the refused event was sent once"
        ids = [h["x-smbgate-event-id"] for h, _ in receiver.got]
        assert len(ids) == 1 and ids[0]
        assert records
    finally:
        gw.stop()


def test_locks_left_by_a_server_that_went_down_are_taken(own_samba, receiver, tmp_path):
    """A server that crashed with the gateway's locks open leaves their
    files: a queue whose lock file nobody holds is still taken over, and
    a bucket whose watcher's lock file is left still gets a watcher."""
    state = own_samba.share_path / ".smbgate"
    queue = state / "events" / "hooks" / "00000000deadbeef"
    queue.mkdir(parents=True, exist_ok=True)
    (state / "events" / "hooks" / "00000000deadbeef.lock").write_bytes(b"")
    left = {"Records": [{"eventName": "ObjectCreated:Put", "s3": {"object": {"key": "left-behind"}}}]}
    (queue / "0000000000000001").write_text(json.dumps(left))
    (state / "watchers").mkdir(parents=True, exist_ok=True)
    (state / "watchers" / "crashed.lock").write_bytes(b"")
    st = own_samba.share_path.stat()
    for p in [state, *state.rglob("*")]:
        os.chown(p, st.st_uid, st.st_gid)
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    try:
        assert [r["s3"]["object"]["key"] for r in receiver.wait_for(1)] == ["left-behind"]
        new_configured_bucket(gw, "crashed", ["s3:ObjectCreated:*"])
        receiver.got.clear()
        deadline = time.time() + 30
        n = 0
        while not receiver.got and time.time() < deadline:
            p = own_samba.share_path / "crashed" / f"on-disk-{n}"
            p.write_bytes(b"x")
            os.chown(p, st.st_uid, st.st_gid)
            n += 1
            time.sleep(1.5)
        assert receiver.got, "no watcher for a bucket whose watcher's lock file was left behind"
    finally:
        gw.stop()


@pytest.fixture
def nats(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"nats://127.0.0.1:{port}"
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait()


def nats_run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def test_events_reach_a_nats_jetstream_stream(own_samba, nats, tmp_path):
    import nats as nats_py

    async def make_stream():
        nc = await nats_py.connect(nats)
        await nc.jetstream().add_stream(name="S3", subjects=["s3.events"])
        await nc.close()

    async def read_stream(n):
        nc = await nats_py.connect(nats)
        sub = await nc.jetstream().pull_subscribe("s3.events", "reader")
        msgs = await sub.fetch(n, timeout=10)
        for m in msgs:
            await m.ack()
        await nc.close()
        return [json.loads(m.data) for m in msgs]

    nats_run(make_stream())
    target = f'[targets.bus]\ntype = "nats"\nurl = "{nats}"\nsubject = "s3.events"\njetstream = true\n'
    metrics_port = _free_port()
    gw = Gateway(own_samba, "--config", str(config_file(tmp_path, target)),
                 env={"SMBGATE_METRICS_LISTEN": f"127.0.0.1:{metrics_port}"})
    try:
        s3, _ = new_configured_bucket(gw, "bus", ["s3:ObjectCreated:Put", "s3:ObjectRemoved:Delete"],
                                      arn="arn:smbgate:sns::bus")
        s3.put_object(Bucket="bus", Key="a", Body=b"abc")
        s3.delete_object(Bucket="bus", Key="a")
        test, *messages = nats_run(read_stream(3))
        assert (test["Event"], test["Bucket"]) == ("s3:TestEvent", "bus")
        records = [m["Records"][0] for m in messages]
        assert [(r["eventName"], r["s3"]["object"]["key"]) for r in records] == [
            ("ObjectCreated:Put", "a"), ("ObjectRemoved:Delete", "a")]
        assert records[0]["s3"]["object"]["eTag"] == hashlib.md5(b"abc").hexdigest()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'smbgate_events_sent_total{target="bus"} 3' in text
        assert 'smbgate_events_queued{target="bus"} 0' in text
    finally:
        gw.stop()


def test_events_of_a_versioned_bucket_name_their_versions(own_samba, receiver, tmp_path):
    gw = webhook_gateway(own_samba, tmp_path, receiver.url)
    try:
        s3, _ = new_configured_bucket(gw, "evv", ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"])
        receiver.wait_for_test_event()
        s3.put_bucket_versioning(Bucket="evv", VersioningConfiguration={"Status": "Enabled"})
        v1 = s3.put_object(Bucket="evv", Key="k", Body=b"one")["VersionId"]
        marker = s3.delete_object(Bucket="evv", Key="k")["VersionId"]
        s3.delete_object(Bucket="evv", Key="k", VersionId=marker)
        records = receiver.wait_for(3)
        assert [(r["eventName"], r["s3"]["object"].get("versionId")) for r in records] == [
            ("ObjectCreated:Put", v1),
            ("ObjectRemoved:DeleteMarkerCreated", marker),
            ("ObjectRemoved:Delete", marker),
        ]
    finally:
        gw.stop()
