"""The LeaderWorkerSet API (`leaderworkerset.x-k8s.io/v1`): the typed model, its
constants (labels, annotations, env vars, conditions), defaulting, validation, the
cluster's size limits, and the CRD generated from the model. Upstream's
`api/leaderworkerset/v1`."""
