"""Installing the shipped manifests (what `config/default` holds) with an admin
client, and acting as the manager's ServiceAccount.

The webhook configurations get `url` client configs pointing at a local port, as
for every local manager (see :mod:`lws_localcluster.deploy`); the rest
is applied as written. Kustomize's `namespace:` is a no-op here because every
namespaced manifest already names `lws-system`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from lws_localcluster.deploy import webhook_configurations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    CRDS,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    SECRETS,
    SERVICES,
    VALIDATING_WEBHOOKS,
    Resource,
)
from leaderworkerset.runtime.client import ApiClient, ApiError

JSON = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
OPERATOR_NAMESPACE = c.DEFAULT_OPERATOR_NAMESPACE
MANAGER_SERVICE_ACCOUNT = "lws-controller-manager"
FIELD_MANAGER = "lws-rbac-test"

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
_RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = Resource(_RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    _RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
ROLES = Resource(_RBAC, "v1", "roles", "Role")
ROLE_BINDINGS = Resource(_RBAC, "v1", "rolebindings", "RoleBinding")

BY_KIND = {
    r.kind: r
    for r in (
        NAMESPACES,
        CRDS,
        SERVICE_ACCOUNTS,
        CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS,
        ROLES,
        ROLE_BINDINGS,
        SERVICES,
        SECRETS,
        MUTATING_WEBHOOKS,
        VALIDATING_WEBHOOKS,
    )
}
WEBHOOK_KINDS = (MUTATING_WEBHOOKS.kind, VALIDATING_WEBHOOKS.kind)
# config/default without ../manager: the manager runs as a local process instead.
INSTALLED_BASES = ("crd", "rbac", "webhook", "internalcert")


def kustomization_documents(base: Path) -> list[JSON]:
    """The documents of a kustomization's plain `resources` (files or folders)."""
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    docs: list[JSON] = []
    for entry in kustomization.get("resources") or []:
        target = base / entry
        if target.is_dir():
            docs += kustomization_documents(target)
        else:
            docs += [d for d in yaml.safe_load_all(target.read_text()) if d]
    return docs


def default_install(webhook_port: int) -> list[JSON]:
    """Everything `config/default` installs but the manager's Deployment and ConfigMap,
    the webhook configurations pointed at 127.0.0.1:`webhook_port`."""
    namespace: JSON = {"apiVersion": "v1", "kind": "Namespace"}
    namespace["metadata"] = {"name": OPERATOR_NAMESPACE}
    docs = [namespace]
    for base in INSTALLED_BASES:
        for doc in kustomization_documents(REPO / "config" / base):
            if doc["kind"] not in (
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
            ):
                docs.append(doc)
    return docs + webhook_configurations(webhook_port, REPO)


async def apply_all(admin: ApiClient, docs: list[JSON]) -> None:
    for doc in docs:
        await admin.apply(BY_KIND[doc["kind"]], doc, field_manager=FIELD_MANAGER)


async def service_account_token(
    admin: ApiClient, name: str, namespace: str = OPERATOR_NAMESPACE, seconds: int = 3600
) -> str:
    """A bound token for the ServiceAccount, from the TokenRequest API."""
    answer = await admin.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    return str(answer["status"]["token"])


def token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig with the admin's cluster (server, CA) and only `token` as user."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    context = next(x["context"] for x in admin["contexts"] if x["name"] == admin["current-context"])
    cluster = next(x["cluster"] for x in admin["clusters"] if x["name"] == context["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "token", "user": {"token": token}}],
        "contexts": [
            {
                "name": "token",
                "context": {"cluster": "local", "user": "token", "namespace": OPERATOR_NAMESPACE},
            }
        ],
        "current-context": "token",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


async def owner_kind_resolvable(
    client: ApiClient, admin: ApiClient, api_version: str = c.API_VERSION, kind: str = c.KIND
) -> bool:
    """Whether the API server's owner-reference admission can resolve `kind` (by
    default LeaderWorkerSet).

    With OwnerReferencesPermissionEnforcement, a blockOwnerDeletion reference by a
    non-admin is refused with 403 until the API server's discovery knows the kind,
    which lags a freshly created CRD. Probed with a throw-away ControllerRevision
    owned by a LeaderWorkerSet that does not exist, written by `client`.
    """
    owner = {
        "apiVersion": api_version,
        "kind": kind,
        "name": "rbac-probe",
        "uid": "00000000-0000-0000-0000-000000000000",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    probe = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "generateName": "rbac-probe-",
            "namespace": OPERATOR_NAMESPACE,
            "ownerReferences": [owner],
        },
        "data": {"probe": True},
        "revision": 1,
    }
    try:
        made = await client.create(CONTROLLER_REVISIONS, probe)
    except ApiError as exc:
        if exc.status == 403 and "RESTMapping" in exc.message:
            return False
        raise
    try:
        await admin.delete(CONTROLLER_REVISIONS, made["metadata"]["name"], OPERATOR_NAMESPACE)
    except ApiError as exc:
        # Its owner does not exist, so the garbage collector may have been first.
        if not exc.not_found:
            raise
    return True
