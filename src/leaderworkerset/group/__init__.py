"""The vocabulary of groups and pods that the reconcilers, the webhooks and
`kubectl lws` share: roles, names, scheduling and readiness gates, readiness, group
size and state, ownership, TPU requests, the controller's options.

Pure functions over plain objects, with no I/O: it imports only `leaderworkerset.api`
(an import-linter contract), never the runtime, the watch caches (which list and watch
the API server: `leaderworkerset.caches`), controllers, webhooks or anything above
them, so that "is this pod a leader" or "is this group ready" has one answer
everywhere.
"""
