"""The LeaderWorkerSet reconciler: revisions, the leader workload (Ordinal: a
StatefulSet with its rolling update; Hash: a Deployment), the shared Service and the
status.

It imports no other controller's package (an import-linter contract): what they
share lives in controllers/ or group/. Its decisions beside the reconciler
(`rolling_update`, `status`, `leader_statefulset`, `leader_deployment`,
`shared_service`) are pure: no runtime, caches or webhooks.
"""
