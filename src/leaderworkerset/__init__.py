"""leaderworkerset: a Python LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1)."""

__version__ = "0.1.0"
