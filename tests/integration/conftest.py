"""Integration tests run against the real local control plane.

Fixtures live in the package (``leaderworkerset.localcluster``) so that the
``lws dev`` command and the tests start the cluster the same way.
"""

pytest_plugins = [
    "leaderworkerset.localcluster.fixtures",
    "leaderworkerset.localcluster.nodesim_fixtures",
    "leaderworkerset.localcluster.lws_fixtures",
]
