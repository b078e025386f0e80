"""The DisaggregatedSet controller: one LeaderWorkerSet per slice, revision and role,
rolled out across roles; a headless Service per revision ready in every role; a
RoleScaler per External role; events, metrics and status.

The decisions sit beside the reconciler and are pure (no runtime, caches or webhooks:
an import-linter contract): `planner` (the next step of a rollout of N roles) and
`rollout` (what one pass does to a slice). What a set owns is built below, in
`api.disaggregatedset.objects` (as upstream builds it), so that the set's webhook
judges each role's LeaderWorkerSet exactly as this controller will send it.
`reconciler` observes (its `caches`, `observed`) and acts on them. It imports no other
controller's package.
"""
