"""The DisaggregatedSet API (`disaggregatedset.x-k8s.io/v1`): the DisaggregatedSet and
DisaggregatedSetRoleScaler models, their constants and CRDs, defaulting, validation,
the names, labels and revision hash of what a set owns (`names`), the objects
themselves (`objects`, `placement`: the controller's builders, here so that the
webhook can judge what the controller sends), and each role judged as its
LeaderWorkerSet (`role_admission`). Upstream's `api/disaggregatedset/v1` and its
controller's builders. Each role embeds a LeaderWorkerSet template, so this package
builds on `api.leaderworkerset`."""
