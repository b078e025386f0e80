"""Object keys and the index functions a watch cache looks objects up by.

Objects are the plain dicts the API client decodes. An index function maps an
object to the values it is filed under; the cache keeps value -> keys maps so a
reconciler finds, say, all pods of one owner without scanning the whole cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from leaderworkerset.api.objects import JSON, controller_uid, meta_of

IndexFunc = Callable[[JSON], Iterable[str]]

NAMESPACE_INDEX = "namespace"
OWNER_UID_INDEX = "owner-uid"
LABEL_INDEX_PREFIX = "label:"


def object_key(obj: JSON) -> str:
    """client-go's MetaNamespaceKeyFunc: ``namespace/name``, or ``name`` if cluster-scoped."""
    meta = meta_of(obj)
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def resource_version(obj: JSON) -> str:
    return str(meta_of(obj).get("resourceVersion", ""))


def by_namespace(obj: JSON) -> Iterable[str]:
    namespace = meta_of(obj).get("namespace")
    return (namespace,) if namespace else ()


def by_controller_uid(obj: JSON) -> Iterable[str]:
    uid = controller_uid(obj)
    return (uid,) if uid else ()


def label_index_name(label: str) -> str:
    return LABEL_INDEX_PREFIX + label


def by_label(label: str) -> IndexFunc:
    """Files objects under ``namespace/<label value>``.

    The namespace is part of the value because label values (an LWS name, a group
    key) are only unique within a namespace, and a cluster-wide cache would
    otherwise mix two namespaces' sets.
    """

    def index(obj: JSON) -> Iterable[str]:
        meta = meta_of(obj)
        value = (meta.get("labels") or {}).get(label)
        if value is None:
            return ()
        return (f"{meta.get('namespace') or ''}/{value}",)

    return index


def label_index_value(namespace: str | None, value: str) -> str:
    """The value to pass to ``by_index(label_index_name(label), ...)``."""
    return f"{namespace or ''}/{value}"
