"""The DisaggregatedSet API (`disaggregatedset.x-k8s.io/v1`): the DisaggregatedSet and
DisaggregatedSetRoleScaler models, their constants and CRDs, defaulting, validation,
and the names, labels and revision hash of what a set owns (`names`). Upstream's
`api/disaggregatedset/v1`. Each role embeds a LeaderWorkerSet template, so this
package builds on `api.leaderworkerset`."""
