"""`kubectl lws`: a read-only view of the groups of a LeaderWorkerSet, installed as
the console script `kubectl-lws` so that kubectl finds it as a plugin.

Only plain GET and LIST requests, with the user's own kubeconfig; nothing of the
local cluster or the controller's servers is imported.
"""
