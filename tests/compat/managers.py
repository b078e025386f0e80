"""The two managers of the migration tests, each run as a process beside the local
control plane: upstream's Go manager and ours (`lws controller`).

Both serve their webhooks on 127.0.0.1 with one serving certificate that the test
session made (:class:`WebhookTLS`), internal certificate management off: a swap of
managers is then only a swap of the port in the webhook configurations' URLs,
which is what an operator does with the Service's selector in a real cluster.
Leader election is off too: only one manager runs at a time.
"""

from __future__ import annotations

from pathlib import Path

from lws_localcluster.manager_process import (
    ManagerProcess,
    UpstreamManager,
    WebhookTLS,
)

from tests.toolkit.manager_process import ProcessGroup


class Managers(ProcessGroup[ManagerProcess]):
    def __init__(self, workdir: Path, kubeconfig: Path, tls: WebhookTLS, go_binary: Path) -> None:
        super().__init__()
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.tls = tls
        self.go_binary = go_binary

    def go(self, name: str = "go") -> ManagerProcess:
        return self.add(
            UpstreamManager(
                name,
                self.workdir,
                self.kubeconfig,
                executable=[str(self.go_binary)],
                tls=self.tls,
                serve_metrics=False,
            )
        )

    def ours(self, name: str = "ours") -> ManagerProcess:
        return self.add(
            ManagerProcess(name, self.workdir, self.kubeconfig, tls=self.tls, serve_metrics=False)
        )
