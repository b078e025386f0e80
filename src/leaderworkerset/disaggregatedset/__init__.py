"""DisaggregatedSet (`disaggregatedset.x-k8s.io/v1`): several roles, each a
LeaderWorkerSet template, rolled out together.

Pure code only: the API model and its CRDs (`api/`), the names, labels and revision
hash of the objects a DisaggregatedSet owns (`names`, `goencoding`), the pod affinity
of a placement policy (`placement`), and the rolling-update decisions (`planner`,
`rollout`). Nothing here talks to the API server; `controllers/disaggregatedset` acts on these
decisions.
"""
