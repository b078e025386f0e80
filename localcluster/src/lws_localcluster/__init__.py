"""A local Kubernetes to run the controller against: etcd, the API server, the
controller manager and the scheduler as local processes, the node simulator
(`nodesim`) in place of kubelets, and the `lws demo` and `lws dev` commands on top.

For demos, benchmarks and the integration tests, never for the controller itself:
only cli (and the tests and benchmarks) import it. It may import the layers below it
(wiring, controllers, webhooks, group, runtime, api), but not its sibling
controller_command (it starts `lws controller` as a process) nor cli or kubectl.
"""
