"""leaderworkerset: a Python controller for the LeaderWorkerSet API
(leaderworkerset.x-k8s.io/v1) and upstream's DisaggregatedSet API
(disaggregatedset.x-k8s.io/v1), with its admission webhooks, `lws` and `kubectl lws`."""

from leaderworkerset._version import __version__

__all__ = ["__version__"]
