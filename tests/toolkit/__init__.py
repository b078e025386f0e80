"""What the test suites share: builders of LeaderWorkerSets and the objects around them,
the fake API client of the unit tests, waiting with a deadline, and helpers for talking to
a cluster, a manager process or a webhook server.

Test modules import from here, never from one another; nothing here imports a test module.
"""
