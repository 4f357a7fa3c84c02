"""The PROXY protocol behind a trusted proxy (issue 23, point 1): with
--proxy-protocol, HAProxy's `send-proxy` / `send-proxy-v2` header names the
client, and that address is what the access log shows and what the
per-client connection share counts. A trusted proxy's connection without a
header is closed; anyone else's header is never believed."""

import http.client
import socket

import pytest

from conftest import Gateway, HAProxy
from s3util import read_lines

PROXY = "127.0.0.9"  # HAProxy connects to the gateway from here


def request(endpoint_port, source, method="HEAD", path="/"):
    """One request from `source` (a loopback address) on a new connection;
    returns (status, the connection) so the caller can keep it open."""
    c = http.client.HTTPConnection("127.0.0.1", endpoint_port, timeout=10, source_address=(source, 0))
    c.request(method, path)
    r = c.getresponse()
    r.read()
    return r.status, c


def unanswered(s):
    """True if the server closes `s` without a byte of answer."""
    try:
        got = s.recv(100)
    except ConnectionResetError:
        got = b""
    s.close()
    return got == b""


def through_proxy(port, client, path="/"):
    """A connection as a trusted proxy's, whose v1 header names `client`,
    with one HEAD answered on it (left open)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(PROXY, 0))
    s.sendall(f"PROXY TCP4 {client} 127.0.0.1 5000 9000\r\nHEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


@pytest.mark.parametrize("send_proxy", ["send-proxy", "send-proxy-v2"])
def test_the_client_behind_haproxy_is_named_and_counted(own_samba, tmp_path, send_proxy):
    log = tmp_path / "access.jsonl"
    gw = Gateway(own_samba, env={"SMBGATE_TRUSTED_PROXIES": PROXY, "SMBGATE_PROXY_PROTOCOL": "true",
                                 "SMBGATE_ACCESS_LOG": str(log)})
    lb = HAProxy([gw], tmp_path, server_opts=f"{send_proxy} source {PROXY}")
    try:
        # HAProxy's health checks (with the header) keep the server up.
        status, c = request(lb.port, "127.0.0.7", path="/missing-bucket-x")
        assert status == 403  # unsigned
        c.close()
        line = [l for l in read_lines(log, 1) if l.get("bucket") == "missing-bucket-x"]
        assert [l["client"] for l in line] == ["127.0.0.7"], line
        # Through HAProxy with the other header version too.
        status, c = request(lb.port, "127.0.0.5", path="/other-bucket-w")
        assert status == 403
        c.close()
        line = [l for l in read_lines(log, 2) if l.get("bucket") == "other-bucket-w"]
        assert [l["client"] for l in line] == ["127.0.0.5"], line
    finally:
        lb.stop()
        gw.stop()


def test_only_trusted_proxies_are_read_and_they_must_send_a_header(own_samba, tmp_path):
    log = tmp_path / "access.jsonl"
    gw = Gateway(own_samba, env={"SMBGATE_TRUSTED_PROXIES": PROXY, "SMBGATE_PROXY_PROTOCOL": "true",
                                 "SMBGATE_ACCESS_LOG": str(log)})
    try:
        # Anyone else: a header is a malformed request, never an address.
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10, source_address=("127.0.0.5", 0))
        s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 5000 9000\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400"), "a forged header is not believed"
        s.close()
        # A plain client not through the proxy is served, under its own address.
        assert request(gw.port, "127.0.0.5", path="/plain-bucket-y")[0] == 403
        assert [l["client"] for l in read_lines(log, 1) if l.get("bucket") == "plain-bucket-y"] == ["127.0.0.5"]
        # The trusted proxy without a header: closed, unanswered.
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10, source_address=(PROXY, 0))
        s.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert unanswered(s)
        # With a header, the request behind it is served.
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10, source_address=(PROXY, 0))
        s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 5000 9000\r\nHEAD /hdr-bucket-z HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 403")
        s.close()
        assert [l["client"] for l in read_lines(log, 2) if l.get("bucket") == "hdr-bucket-z"] == ["203.0.113.7"]
    finally:
        gw.stop()


def test_proxy_protocol_without_a_trusted_proxy_is_refused_at_startup(own_samba):
    with pytest.raises(Exception) as e:
        Gateway(own_samba, env={"SMBGATE_PROXY_PROTOCOL": "true"})
    assert "--proxy-protocol: name the proxies" in str(e.value)


def test_each_client_behind_the_proxy_has_its_own_share(own_samba):
    """--max-connections-per-client counts the address the header names: the
    proxy itself has no share, each client behind it has its own."""
    gw = Gateway(own_samba, env={"SMBGATE_TRUSTED_PROXIES": PROXY, "SMBGATE_PROXY_PROTOCOL": "true",
                                 "SMBGATE_MAX_CONNECTIONS_PER_CLIENT": "2"})
    held = []
    try:
        for _ in range(2):
            s = through_proxy(gw.port, "203.0.113.7")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            held.append(s)
        assert unanswered(through_proxy(gw.port, "203.0.113.7")), "a third from the same client is over its share"
        s = through_proxy(gw.port, "203.0.113.8")
        assert s.recv(100).startswith(b"HTTP/1.1 200"), "another client behind the same proxy is served"
        held.append(s)
    finally:
        for s in held:
            s.close()
        gw.stop()


def test_a_trusted_proxy_without_a_header_is_a_warning_at_most_once_per_interval(own_samba):
    """Issue 43, item 6: a trusted proxy's connection closed for want of a
    PROXY header (HAProxy without send-proxy, say) was logged at DEBUG only,
    so an operator saw every request fail and no reason. It is a WARN now,
    one line per 10 s at most, the next one counting those left out."""
    import time
    gw = Gateway(own_samba, env={"SMBGATE_TRUSTED_PROXIES": PROXY, "SMBGATE_PROXY_PROTOCOL": "true",
                                 "SMBGATE_LOG": "warn"})
    warned = lambda: [l for l in open(gw.log.name).read().splitlines() if "must start with a PROXY header" in l]
    try:
        def headerless():
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=10, source_address=(PROXY, 0))
            s.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert unanswered(s)
        headerless()
        # The gateway logs before it closes, so its 10 s began before now.
        started = time.monotonic()
        for _ in range(2):
            headerless()
        # A connection closed before a header's first 12 bytes came is no warning.
        socket.create_connection(("127.0.0.1", gw.port), timeout=10, source_address=(PROXY, 0)).close()
        time.sleep(0.5)
        lines = warned()
        assert len(lines) == 1, lines
        assert "WARN" in lines[0] and f"peer={PROXY}:" in lines[0] and "not_logged_before=0" in lines[0], lines[0]
        time.sleep(max(0.0, 10.5 - (time.monotonic() - started)))
        headerless()
        time.sleep(0.5)
        lines = warned()
        assert len(lines) == 2 and "not_logged_before=2" in lines[1], lines
    finally:
        gw.stop()
