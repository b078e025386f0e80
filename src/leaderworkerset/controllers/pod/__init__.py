"""The pod reconciler: for each leader pod its group (the worker StatefulSet, the
per-group Service, the gang-scheduling PodGroup, Hash mode's group-ready gate) and,
for every group pod, the group restart policy.

It imports no other controller's package (an import-linter contract): what they
share lives in controllers/ or group/. Its decisions beside the reconciler
(`worker_statefulset`, `group_service`) are pure: no runtime, caches or webhooks.
"""
