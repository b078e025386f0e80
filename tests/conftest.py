"""The local-cluster pytest plugins, registered here (the top-level conftest of the test
paths) so that they load for any selection of tests, from the whole suite to one file."""

pytest_plugins = [
    "tests.fixtures.controlplane",
    "tests.fixtures.nodesim",
    "tests.fixtures.lws",
    "tests.fixtures.realnode",
]
