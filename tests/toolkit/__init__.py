"""What the test suites share: one builder module per kind (lws.py for LeaderWorkerSets,
disaggregatedset.py for DisaggregatedSets, pods.py for Pods, statefulsets.py for
StatefulSets, each with the presets the suites keep using; metadata.py what they share),
the one recording event recorder (recorded_events.py), the count of LeaderWorkerSet
decodes (decodes.py), the fake API client of the unit tests, waiting with a
deadline, and helpers for talking to a cluster, a manager process or a webhook server.

Test modules import from here, never from one another; nothing here imports a test module.
"""
