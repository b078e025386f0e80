"""The DisaggregatedSet controller: one LeaderWorkerSet per slice, revision and role,
rolled out across roles; a headless Service per revision ready in every role; a
RoleScaler per External role; events, metrics and status.

The decisions sit beside the reconciler and are pure (no runtime, caches or webhooks:
an import-linter contract): `objects` (what a set owns, built as upstream builds it),
`placement` (a placement policy's pod affinity), `planner` (the next step of a rollout
of N roles) and `rollout` (what one pass does to a slice). `reconciler` observes (its
`caches`, `observed`) and acts on them. It imports no other controller's package.
"""
