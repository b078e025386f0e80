"""A local Kubernetes to run the controller against: etcd, the API server, the
controller manager and the scheduler as local processes, the node simulator
(`nodesim`) in place of kubelets, one real node (`realnode`), and the `lws dev` and
`lws demo` commands on top.

A distribution of its own, `leaderworkerset-localcluster` (`localcluster/` in the
repository; `make setup` installs it beside the controller), for demos, benchmarks and
the tests, never for the controller itself: `leaderworkerset` never imports it (an
import-linter contract), and `lws` finds `lws dev` and `lws demo` here by name only
when they run. It may import the controller's layers below it (wiring, controllers,
webhooks, group, runtime, api), but not `controller_command` (it starts
`lws controller` as a process), `cli` or `kubectl`.
"""
