"""leaderworkerset: a Python controller for the LeaderWorkerSet API
(leaderworkerset.x-k8s.io/v1) and upstream's DisaggregatedSet API
(disaggregatedset.x-k8s.io/v1), with its admission webhooks, `lws` and `kubectl lws`."""

__version__ = "0.1.0"
