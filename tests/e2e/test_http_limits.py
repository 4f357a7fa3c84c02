"""HTTP server limits: a client that never finishes its headers is dropped
after --header-read-timeout, and past --max-connections further clients
wait until a connection closes (they are not served, and cost nothing)."""

import socket
import time

import pytest

from conftest import Gateway


def connect(gw):
    return socket.create_connection(("127.0.0.1", gw.port), timeout=10)


def answered_within(sock, seconds):
    """The first bytes the server sends within `seconds`, or None."""
    sock.settimeout(seconds)
    try:
        return sock.recv(4096)
    except socket.timeout:
        return None


@pytest.fixture
def gw(samba, request):
    g = Gateway(samba, env=request.param)
    yield g
    g.stop()


@pytest.mark.parametrize("gw", [{"SMBGATE_HEADER_READ_TIMEOUT": "1"}], indirect=True)
def test_a_client_that_never_finishes_its_headers_is_dropped(gw):
    s = connect(gw)
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line, ever
    t0 = time.monotonic()
    got = answered_within(s, 10)
    assert got is not None and time.monotonic() - t0 < 5, got
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
    # Other clients are served meanwhile.
    s2 = connect(gw)
    s2.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answered_within(s2, 5).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("gw", [{"SMBGATE_MAX_CONNECTIONS": "2"}], indirect=True)
def test_past_the_connection_cap_a_client_waits_for_a_free_slot(gw):
    held = [connect(gw), connect(gw)]
    time.sleep(0.3)  # both accepted: the two slots are taken
    waiting = connect(gw)  # the kernel's backlog still accepts the TCP connection
    waiting.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answered_within(waiting, 1.5) is None, "served past the cap"
    held.pop().close()
    got = answered_within(waiting, 5)
    assert got is not None and got.startswith(b"HTTP/1.1 200"), got
