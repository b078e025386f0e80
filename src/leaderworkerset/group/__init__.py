"""The vocabulary of groups and pods that the reconcilers, the webhooks and
`kubectl lws` share: roles, names, scheduling and readiness gates, readiness, group
size and state, the typed view of a LeaderWorkerSet, options, Go's integer rules.

Pure functions over plain objects, with no I/O: it imports only `leaderworkerset.api`
(an import-linter contract), never the runtime, the watch caches (which list and watch
the API server: `leaderworkerset.caches`), controllers, webhooks or anything above
them, so that "is this pod a leader" or "is this group ready" has one answer
everywhere.
"""
