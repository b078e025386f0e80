"""The DisaggregatedSet reconciler: one LeaderWorkerSet per slice, revision and role,
rolled out by `disaggregatedset.rollout`'s decisions; a headless Service per revision
ready in every role; a RoleScaler per External role; events, metrics and status.

It imports no other reconciler's package: what the decisions are lives in
`leaderworkerset.disaggregatedset` (pure), this package only observes and acts.
"""
