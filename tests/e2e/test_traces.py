"""OpenTelemetry traces (issue 40, point 4): with --otlp-endpoint, one
server span per S3 request, named by its operation, with the HTTP semantic
conventions and the aws.s3.* attributes; the store's steps and the SMB
round trips under it, with their NTSTATUS; a W3C traceparent honoured; the
sample ratio applied to requests without one."""

import pytest

from conftest import ACCESS_KEY, Gateway, Samba
from otlp_receiver import CLIENT, SERVER, STATUS_ERROR, Receiver


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def traced_gateway(samba, receiver, *extra):
    # Spans leave in batches every 100 ms rather than every 5 s.
    return Gateway(samba, "--otlp-endpoint", receiver.endpoint, *extra, env={"OTEL_BSP_SCHEDULE_DELAY": "100"})


def request_id(answer):
    return answer["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]


def with_traceparent(s3, value):
    """`s3` sending `traceparent: value` (added after signing)."""
    def add(request, **_):
        request.headers["traceparent"] = value
    s3.meta.events.register("before-send.s3.*", add)
    return s3


def test_one_server_span_per_request_with_the_http_and_s3_attributes(own_samba, receiver):
    gw = traced_gateway(own_samba, receiver)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="traced")
        put = s3.put_object(Bucket="traced", Key="dir/a b.txt", Body=b"x" * 1000)
        got = s3.get_object(Bucket="traced", Key="dir/a b.txt")
        assert got["Body"].read() == b"x" * 1000
        upload = s3.create_multipart_upload(Bucket="traced", Key="big")
        part = s3.upload_part(Bucket="traced", Key="big", UploadId=upload["UploadId"], PartNumber=1, Body=b"p")
        with pytest.raises(s3.exceptions.NoSuchKey) as missing:
            s3.get_object(Bucket="traced", Key="missing")

        span = receiver.server_span(request_id(put))
        assert (span.name, span.kind) == ("PutObject", SERVER)
        assert span.attrs["http.request.method"] == "PUT"
        assert span.attrs["http.response.status_code"] == 200
        assert span.attrs["http.route"] == "/{Bucket}/{Key+}"
        assert span.attrs["url.scheme"] == "http"
        assert span.attrs["client.address"] == "127.0.0.1"
        assert span.attrs["server.address"] == "127.0.0.1"
        assert (span.attrs["aws.s3.bucket"], span.attrs["aws.s3.key"]) == ("traced", "dir/a b.txt")
        assert span.attrs["user.name"] == ACCESS_KEY
        assert span.resource["service.name"] == "smbgate"

        span = receiver.server_span(request_id(got))
        assert (span.name, span.attrs["http.request.method"], span.attrs["http.response.status_code"]) == (
            "GetObject", "GET", 200)
        span = receiver.server_span(request_id(part))
        assert (span.name, span.attrs["aws.s3.upload_id"]) == ("UploadPart", upload["UploadId"])
        missing_id = missing.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        span = receiver.server_span(missing_id)
        assert (span.name, span.attrs["http.response.status_code"]) == ("GetObject", 404)
        assert span.status != STATUS_ERROR, "a 4xx is the client's error, not the server span's"
        assert all(path == "/v1/traces" and kind == "application/x-protobuf" for path, kind in receiver.requests)
    finally:
        gw.stop()


def test_store_steps_and_smb_round_trips_are_children_with_their_status(own_samba, receiver):
    gw = traced_gateway(own_samba, receiver)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="steps")
        put = s3.put_object(Bucket="steps", Key="k", Body=b"data")
        with pytest.raises(s3.exceptions.NoSuchKey) as missing:
            s3.get_object(Bucket="steps", Key="missing")

        under = receiver.descendants(receiver.server_span(request_id(put)))
        names = {s.name for s in under}
        assert "store.publish" in names, names
        smb = [s for s in under if s.kind == CLIENT]
        assert smb and all(s.name.startswith("SMB2 ") for s in smb), smb
        # A new key: its name is looked up and not found, the temp file is
        # written, then renamed over the key's name and closed.
        answers = {(s.attrs["smb.command"], s.attrs["smb.status"]) for s in smb}
        assert ("CREATE+QUERY_INFO+CLOSE", "STATUS_OBJECT_NAME_NOT_FOUND") in answers, answers
        assert ("CREATE+WRITE", "STATUS_SUCCESS") in answers, answers
        assert ("SET_INFO+CLOSE", "STATUS_SUCCESS") in answers, answers
        assert all(s.attrs["server.address"] == "127.0.0.1" and s.attrs["smb.credit_charge"] >= 1 for s in smb)

        missing_id = missing.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        under = receiver.descendants(receiver.server_span(missing_id))
        assert "store.lookup" in {s.name for s in under}
        not_found = [s for s in under if s.kind == CLIENT and s.attrs.get("smb.status") == "STATUS_OBJECT_NAME_NOT_FOUND"]
        assert not_found, [s.attrs for s in under if s.kind == CLIENT]
        assert all(s.status == STATUS_ERROR for s in not_found)
    finally:
        gw.stop()


def test_a_large_get_has_one_span_per_segment_and_none_per_read(receiver):
    # 1 MiB READs and 8 MiB segments: a 24 MiB GET is 24 READs in 3
    # segments (an open may carry the segment's first READ in its compound).
    samba = Samba("--global-option", "smb2 max read = 1048576")
    gw = traced_gateway(samba, receiver, "--segment-size", "8MiB")
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="large")
        data = bytes(range(256)) * (24 * 4096)
        s3.put_object(Bucket="large", Key="big", Body=data)
        got = s3.get_object(Bucket="large", Key="big")
        assert got["Body"].read() == data
        under = receiver.descendants(receiver.server_span(request_id(got)))
        segments = [s for s in under if s.name == "store.segment"]
        assert 1 <= len(segments) <= 3, segments
        assert sum(s.attrs["bytes"] for s in segments) <= len(data)
        assert [s.name for s in under].count("store.stream") == 1
        commands = [s.attrs["smb.command"] for s in under if s.kind == CLIENT]
        reads = sum(c.split("+").count("READ") for c in commands)
        assert reads <= 1 + len(segments), commands
    finally:
        gw.stop()
        samba.stop()


def test_a_traceparent_is_followed_and_the_ratio_applies_to_requests_without_one(own_samba, receiver):
    gw = traced_gateway(own_samba, receiver, "--otlp-sample-ratio", "0")
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        s3 = gw.client()
        unsampled_root = s3.create_bucket(Bucket="ratio")
        not_sampled = with_traceparent(gw.client(), f"00-{'1' * 32}-{parent_id}-00").head_bucket(Bucket="ratio")
        sampled = with_traceparent(gw.client(), f"00-{trace_id}-{parent_id}-01").head_bucket(Bucket="ratio")
        span = receiver.server_span(request_id(sampled))
        assert (span.trace_id, span.parent_id, span.name) == (trace_id, parent_id, "HeadBucket")
        # Spans leave in order: the sampled one came, so the others would have.
        for skipped in (unsampled_root, not_sampled):
            with receiver.lock:
                assert not [s for s in receiver.spans if s.attrs.get("aws.request_id") == request_id(skipped)]
    finally:
        gw.stop()


def test_a_bad_endpoint_is_refused_at_startup_with_one_line(own_samba):
    with pytest.raises(RuntimeError) as e:
        Gateway(own_samba, "--otlp-endpoint", "collector:4318")
    assert "smbgate: --otlp-endpoint" in str(e.value), str(e.value)
