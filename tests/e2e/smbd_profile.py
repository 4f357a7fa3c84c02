"""smbd's profiling counters, for the bench scripts that count what the
server did per request (scripts/bench-versions, scripts/bench-if-match)
and the tests that count its requests (test_listing_*.py)."""

import os
import re
import subprocess
import time

from conftest import Samba


def profiled_samba(*more):
    """A throwaway Samba (`more`: options for scripts/samba-test-server)
    with smbd's profiling counters on, and a reader of them: a function
    returning {counter name: count}."""
    samba = Samba("--global-option", "smbd profiling level = count", *more)
    conf = os.path.join(samba.env["SMB_DIR"], "smb.conf")

    def counters():
        out = subprocess.run(["smbstatus", "-s", conf, "-P"], capture_output=True, text=True).stdout
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)_count:\s+(\d+)", out, re.M)}

    return samba, counters


def smb2_per_request(before, after, requests):
    """The SMB2 commands smbd served between two readings of its counters,
    per request of `requests`, by command: {"create": 4.0, ...}."""
    return {k[5:]: (after[k] - before.get(k, 0)) / requests for k in after
            if k.startswith("smb2_") and after[k] > before.get(k, 0)}


def settled_count(samba, name):
    """smbd's counter `name` (as `smb2_find`) once every request served so
    far is in it: its processes publish their counters a second or so
    after a change, later on a busy machine, so it is read until it stays
    the same for 1.5 s."""
    conf = os.path.join(samba.env["SMB_DIR"], "smb.conf")

    def read():
        out = subprocess.run(["smbstatus", "-s", conf, "-P"], capture_output=True, text=True, check=True).stdout
        return int(re.search(rf"^{name}_count:\s+(\d+)", out, re.M).group(1))

    time.sleep(2)
    last, since = read(), time.monotonic()
    deadline = since + 30
    while time.monotonic() - since < 1.5:
        assert time.monotonic() < deadline, f"smbd's {name} count still changing after 30 s"
        time.sleep(0.25)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last
