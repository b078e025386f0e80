"""One node run for real beside the simulated ones: containerd and runc run the pods,
a kubelet and kube-proxy built from the control plane's own Kubernetes module serve
it, and CoreDNS (built from its Go module) is the cluster DNS.

There is at most one real node per machine: it owns a bridge, the kubelet's ports and
iptables rules, so its names and addresses are fixed (``layout``). Everything it
starts is a child process that dies with its owner; what a killed owner leaves behind
(containers, mounts, rules) is swept before the next start (``host``).
"""
