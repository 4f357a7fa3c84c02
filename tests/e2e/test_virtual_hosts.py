"""Virtual-hosted-style addressing (issue 12, point 5): with --domain,
`bucket.<domain>` names the bucket, and path style keeps working on the
same gateway. The test resolves *.s3.test to 127.0.0.1 inside this process."""

import socket
import uuid

import boto3
import pytest
from botocore.config import Config

from conftest import ACCESS_KEY, REGION, SECRET_KEY, Gateway


@pytest.fixture(scope="module")
def vgw(samba):
    g = Gateway(samba, "--domain", "s3.test")
    yield g
    g.stop()


@pytest.fixture
def resolve_s3_test(monkeypatch):
    real = socket.getaddrinfo

    def fake(host, *args, **kw):
        if isinstance(host, str) and (host == "s3.test" or host.endswith(".s3.test")):
            host = "127.0.0.1"
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def client(endpoint, style):
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY,
                        config=Config(s3={"addressing_style": style}, retries={"total_max_attempts": 1}))


def test_virtual_hosted_and_path_style_reach_the_same_objects(vgw, samba, resolve_s3_test):
    vh = client(f"http://s3.test:{vgw.port}", "virtual")
    path = client(vgw.endpoint, "path")
    bucket = f"vh-{uuid.uuid4().hex[:8]}"
    vh.create_bucket(Bucket=bucket)
    vh.put_object(Bucket=bucket, Key="dir/k.txt", Body=b"virtual")
    assert (samba.share_path / bucket / "dir" / "k.txt").read_bytes() == b"virtual"
    assert path.get_object(Bucket=bucket, Key="dir/k.txt")["Body"].read() == b"virtual"
    assert [o["Key"] for o in vh.list_objects_v2(Bucket=bucket)["Contents"]] == ["dir/k.txt"]
    assert bucket in [b["Name"] for b in vh.list_buckets()["Buckets"]]
    path.delete_object(Bucket=bucket, Key="dir/k.txt")
    vh.delete_bucket(Bucket=bucket)


def test_a_bad_domain_is_refused_at_startup(samba):
    with pytest.raises(RuntimeError) as e:
        Gateway(samba, "--domain", "not a domain")
    assert "--domain" in str(e.value) and "not a DNS name" in str(e.value)


def test_sigv2_signs_the_bucket_a_host_names(vgw, resolve_s3_test):
    """SigV2's resource starts with `/bucket` when the Host names it; the
    gateway's own constant-time check (issue 23, point 6.2) must agree."""
    v2 = boto3.client("s3", endpoint_url=f"http://s3.test:{vgw.port}", region_name=REGION,
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                      config=Config(s3={"addressing_style": "virtual"}, signature_version="s3",
                                    retries={"total_max_attempts": 1}))
    bucket = f"vh2-{uuid.uuid4().hex[:8]}"
    v2.create_bucket(Bucket=bucket)
    v2.put_object(Bucket=bucket, Key="a/b.txt", Body=b"v2 by host")
    assert v2.get_object(Bucket=bucket, Key="a/b.txt")["Body"].read() == b"v2 by host"
    assert [o["Key"] for o in v2.list_objects(Bucket=bucket)["Contents"]] == ["a/b.txt"]
    v2.delete_object(Bucket=bucket, Key="a/b.txt")
    v2.delete_bucket(Bucket=bucket)


def h2_exchange(port, headers, body=b""):
    """One HTTP/2 request (prior knowledge, no Host header: HTTP/2 carries
    the host as `:authority`), and its answer: (status, headers, body)."""
    import h2.config
    import h2.connection
    import h2.events
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers, end_stream=not body)
        if body:
            conn.send_data(sid, body, end_stream=True)
        s.sendall(conn.data_to_send())
        status, got, out = None, {}, b""
        while True:
            data = s.recv(65536)
            assert data, "the gateway closed the connection"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    got = dict(ev.headers)
                    status = int(got[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    out += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded):
                    return status, got, out
            s.sendall(conn.data_to_send())


def test_cors_and_forms_over_http2_find_the_bucket_in_the_authority(vgw, samba):
    """Issue 43, 5b: HTTP/2 sends no Host, only `:authority`. s3s reads the
    bucket from it; the gateway's CORS preflight and POST Object read the
    Host header only, so they took the first path segment as the bucket."""
    s3 = client(vgw.endpoint, "path")
    bucket = f"h2-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["http://app.example"], "AllowedMethods": ["PUT"]}]})
    authority = f"{bucket}.s3.test:{vgw.port}"
    status, headers, _ = h2_exchange(vgw.port, [
        (":method", "OPTIONS"), (":scheme", "http"), (":authority", authority), (":path", "/docs/a.txt"),
        ("origin", "http://app.example"), ("access-control-request-method", "PUT")])
    assert status == 200
    assert headers.get("access-control-allow-origin") == "http://app.example"

    post = client(vgw.endpoint, "path").generate_presigned_post(bucket, "by-form.txt")
    boundary = "h2-form-boundary"
    form = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                    for k, v in post["fields"].items())
    form += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\n\r\n'
             f"over http/2\r\n--{boundary}--\r\n").encode()
    status, headers, body = h2_exchange(vgw.port, [
        (":method", "POST"), (":scheme", "http"), (":authority", authority), (":path", "/"),
        ("content-type", f"multipart/form-data; boundary={boundary}"), ("content-length", str(len(form)))], form)
    assert status == 204, body
    assert headers["location"] == f"http://{authority}/by-form.txt"
    assert (samba.share_path / bucket / "by-form.txt").read_bytes() == b"over http/2"
