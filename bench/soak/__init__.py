"""An hour (or `--minutes`) of churn against a local cluster, with the controller as two
processes of its own under leader election: `python -m bench.soak` (`make soak`).

What runs and what passes is in docs/soak.md. The modules: `fleet` (the LeaderWorkerSets
and nodes), `schedule` (the seeded churn, pure), `churn` (carrying out its actions),
`watch` (the invariants checked all along, and stuck groups), `sampler` (the controller's
figures once a minute), `report` (the pass conditions, table and charts).
"""
