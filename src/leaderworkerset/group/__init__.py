"""The vocabulary of groups and pods that the controllers and the webhooks share:
roles, names, gates, readiness, group state, the typed view of a LeaderWorkerSet,
options.

Pure functions over objects, no I/O: it imports only `leaderworkerset.api`. The
watch caches, which list and watch the API server, live in `leaderworkerset.caches`.
"""
