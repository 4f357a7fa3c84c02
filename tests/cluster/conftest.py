"""Fixtures for the CTDB trial (scripts/ctdb-trial; not in the default
suite): a two-node Samba cluster from scripts/ctdb-cluster, one smbgate on
each node, and HAProxy in front of both. The fixtures carry the names the
two-instance tests in tests/e2e ask for (`own_samba`, `pair`), so those
tests run here unchanged, each instance on its own node."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The e2e tests import their helpers as `conftest`, which here names this
# module; so this module loads tests/e2e/conftest.py and offers its names.
E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E))
_spec = importlib.util.spec_from_file_location("e2e_conftest", E2E / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
ACCESS_KEY, SECRET_KEY, REGION, ROOT = _e2e.ACCESS_KEY, _e2e.SECRET_KEY, _e2e.REGION, _e2e.ROOT
Gateway, HAProxy, balanced_pair = _e2e.Gateway, _e2e.HAProxy, _e2e.balanced_pair


class Cluster:
    """The running cluster: `env` as scripts/ctdb-cluster printed it,
    `share_path` the directory both nodes serve, `nodes` one view per node
    that Gateway accepts as its Samba."""

    def __init__(self):
        # As in tests/e2e: SMBGATE_TEST_SHARE_OPTIONS ("opt = v; opt2 = v2")
        # runs the trial on another kind of share.
        out = subprocess.run([str(ROOT / "scripts/ctdb-cluster"), "start", *_e2e.share_options_from_env()],
                             check=True, capture_output=True, text=True).stdout
        self.env = _e2e.parse_env_lines(out)
        self.port = int(self.env["SMB_PORT"])
        self.share_path = Path(self.env["SMB_SHARE_PATH"])
        self.nodes = [Node(self, host) for host in self.env["SMB_HOSTS"].split()]

    def stop(self):
        if os.environ.get("SMBGATE_TRIAL_KEEP"):
            return  # left for inspection: scripts/ctdb-cluster stop CLUSTER_DIR
        subprocess.run([str(ROOT / "scripts/ctdb-cluster"), "stop", self.env["CLUSTER_DIR"]], capture_output=True)


class Node:
    """One node of `cluster`, as a Samba for Gateway."""

    def __init__(self, cluster, host):
        self.env = dict(cluster.env, SMB_HOST=host)
        self.port = cluster.port
        self.share_path = cluster.share_path


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def own_samba(cluster):
    return cluster


@pytest.fixture(scope="module")
def pair(cluster, tmp_path_factory):
    """smbgate a on node 0 and b on node 1, and HAProxy over both."""
    env = {"SMBGATE_LOG": os.environ.get("SMBGATE_TRIAL_LOG", "warn")}
    yield from balanced_pair(cluster.nodes[0], cluster.nodes[1], tmp_path_factory.mktemp("ctdb"), env)
