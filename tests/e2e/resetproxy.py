"""A TCP proxy between smbgate and smbd that can reset every connection it
carries (RST to both sides, smbd stays up) and refuse new ones for a while:
the faults of a flaky network or a failing-over load balancer, which Samba
itself cannot produce. It can also hold back every answer that begins with
an SMB2 CREATE (`create_delay`, seconds), to widen the gap between a
request's look at a name and what it does next, and hold back each
QUERY_DIRECTORY answer (`find_delay`, seconds) while the connection's
other answers go on, to make a directory read last longer than the time
some clients take to arrive. With `rate` (bytes per
second) it caps what each connection carries from client to server, like a
NAS that serves each connection from one slow process."""

import socket
import struct
import threading
import time


def _rst_close(s):
    # Linger 0 makes the close a RST. A pump thread blocked in recv() holds
    # the socket, so the close alone would not happen until it returns:
    # shut the reading side first to wake it (SHUT_RD sends nothing).
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


def _commands(msg):
    """The commands of an SMB2 message and the ones compounded after it
    (MS-SMB2 2.2.1: Command at byte 12, NextCommand at byte 20); none for
    an encrypted or SMB1 message."""
    out, at = [], 0
    while msg[at:at + 4] == b"\xfeSMB" and len(msg) >= at + 64:
        out.append(int.from_bytes(msg[at + 12:at + 14], "little"))
        step = int.from_bytes(msg[at + 20:at + 24], "little")
        if not step:
            break
        at += step
    return out


class ResetProxy:
    def __init__(self, upstream_port):
        self.upstream = ("127.0.0.1", upstream_port)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.refusing = False
        self.resets = 0          # reset_all calls
        self.cut = 0             # connections cut by them
        self.create_delay = 0.0  # seconds added to each CREATE answer
        self.find_delay = 0.0    # seconds each QUERY_DIRECTORY answer is held back
        self.rate = 0            # bytes/s each connection carries to the server (0: no cap)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                refusing = self.refusing
            if refusing:
                _rst_close(c)
                continue
            try:
                u = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _rst_close(c)
                continue
            u.settimeout(None)
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = (c, u)
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._pump, args=(c, u, pair), daemon=True).start()
            threading.Thread(target=self._answers, args=(u, c, pair), daemon=True).start()

    def _pump(self, src, dst, pair):
        due = time.monotonic()  # when the bytes sent so far may have left, at `rate`
        try:
            while True:
                b = src.recv(64 << 10 if self.rate else 1 << 20)
                if not b:
                    break
                if self.rate:
                    due = max(due, time.monotonic()) + len(b) / self.rate
                    time.sleep(max(0.0, due - time.monotonic()))
                dst.sendall(b)
        except OSError:
            pass
        self._drop(pair, rst=False)

    def _answers(self, src, dst, pair):
        """Server to client, one transport frame (MS-SMB2 2.1: a 4-byte
        length, then the message) at a time, so that a CREATE answer can be
        held back whole."""
        def exactly(n):
            b = b""
            while len(b) < n:
                more = src.recv(n - len(b))
                if not more:
                    raise OSError("closed")
                b += more
            return b
        sending = threading.Lock()

        def send(frame):
            with sending:
                try:
                    dst.sendall(frame)
                except OSError:
                    pass
        try:
            while True:
                head = exactly(4)
                msg = exactly(int.from_bytes(head[1:], "big"))
                commands = _commands(msg)
                if self.create_delay and commands[:1] == [5]:
                    time.sleep(self.create_delay)
                if self.find_delay and 14 in commands:
                    # A client matches answers to requests by MessageId
                    # (MS-SMB2 3.2.5.1), so the answers after this one
                    # may go on meanwhile.
                    threading.Timer(self.find_delay, send, args=(head + msg,)).start()
                    continue
                send(head + msg)
        except OSError:
            pass
        self._drop(pair, rst=False)

    def _drop(self, pair, rst):
        with self.lock:
            if pair not in self.pairs:
                return
            self.pairs.remove(pair)
        for s in pair:
            if rst:
                _rst_close(s)
            else:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def reset_all(self):
        """Resets every connection now; returns how many were cut."""
        with self.lock:
            pairs = list(self.pairs)
            self.resets += 1
        for p in pairs:
            self._drop(p, rst=True)
        with self.lock:
            self.cut += len(pairs)
        return len(pairs)

    def refuse(self, on):
        """While on, new connections are reset as soon as they arrive."""
        with self.lock:
            self.refusing = on

    def stop(self):
        self.stopped = True
        _rst_close(self.lsock)
        with self.lock:
            pairs = list(self.pairs)
        for p in pairs:
            self._drop(p, rst=True)
