"""Object-metadata rules of the API server (names, label and annotation syntax).

The messages are the standard apimachinery ones, so users see the same text
as from any other Kubernetes object.
"""

from __future__ import annotations

import re
from typing import Any

from leaderworkerset.api.errors import FieldError, invalid, required, too_long, type_error

DNS1035_LABEL_MAX = 63
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
TOTAL_ANNOTATION_SIZE_MAX = 256 * 1024

_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _name_errors(value: str, limit: int, pattern: re.Pattern[str], msg: str) -> list[str]:
    msgs: list[str] = []
    if len(value) > limit:
        msgs.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):  # whole, as Go's ^...$ (Python's $ allows a "\n")
        msgs.append(msg)
    return msgs


def dns1035_label_errors(value: str) -> list[str]:
    return _name_errors(value, DNS1035_LABEL_MAX, _DNS1035_LABEL, DNS1035_LABEL_MSG)


def dns1123_label_errors(value: str) -> list[str]:
    return _name_errors(value, DNS1123_LABEL_MAX, _DNS1123_LABEL, DNS1123_LABEL_MSG)


def dns1123_subdomain_errors(value: str) -> list[str]:
    return _name_errors(value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MSG)


def qualified_name_errors(value: str) -> list[str]:
    """Label and annotation keys: an optional DNS-1123 subdomain prefix, '/', a name."""
    msgs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            msgs.append("prefix part must be non-empty")
        else:
            if len(prefix) > DNS1123_SUBDOMAIN_MAX:
                msgs.append(f"prefix part must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                msgs.append("prefix part " + DNS1123_SUBDOMAIN_MSG)
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name', "
            " or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        msgs.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    if name and not _QUALIFIED_NAME.fullmatch(name):
        msgs.append(QUALIFIED_NAME_MSG)
    return msgs


def label_value_errors(value: str) -> list[str]:
    msgs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        msgs.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.fullmatch(value):
        msgs.append(LABEL_VALUE_MSG)
    return msgs


def validate_object_meta(meta: Any, path: str = "metadata") -> list[FieldError]:
    """Name (a DNS-1035 label: it becomes a Service name), namespace, labels, annotations."""
    if meta is None:
        return [required(f"{path}.name", "name or generateName is required")]
    if not isinstance(meta, dict):
        return [type_error(path, meta, "object")]
    errs: list[FieldError] = []
    name = meta.get("name")
    generate_name = meta.get("generateName")
    if not name and not generate_name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    if isinstance(name, str) and name:
        errs.extend(invalid(f"{path}.name", name, m) for m in dns1035_label_errors(name))
    elif name is not None and not isinstance(name, str):
        errs.append(type_error(f"{path}.name", name, "string"))
    if isinstance(generate_name, str) and generate_name:
        # The server appends 5 random characters, so the prefix may end in '-'.
        prefix = generate_name.rstrip("-") or generate_name
        errs.extend(
            invalid(f"{path}.generateName", generate_name, m) for m in dns1035_label_errors(prefix)
        )
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        errs.extend(
            invalid(f"{path}.namespace", namespace, m) for m in dns1123_label_errors(namespace)
        )
    errs.extend(_validate_labels(meta.get("labels"), f"{path}.labels"))
    errs.extend(_validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    return errs


def _validate_labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [type_error(path, labels, "object")]
    errs: list[FieldError] = []
    for key, value in labels.items():
        errs.extend(invalid(path, key, m) for m in qualified_name_errors(key))
        if not isinstance(value, str):
            errs.append(type_error(f"{path}[{key}]", value, "string"))
            continue
        errs.extend(invalid(path, value, m) for m in label_value_errors(value))
    return errs


def _validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [type_error(path, annotations, "object")]
    errs: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errs.extend(invalid(path, key, m) for m in qualified_name_errors(key.lower()))
        if not isinstance(value, str):
            errs.append(type_error(f"{path}[{key}]", value, "string"))
            continue
        total += len(key) + len(value)
    if total > TOTAL_ANNOTATION_SIZE_MAX:
        errs.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_MAX))
    return errs


# --- The wording of Kubernetes' declarative validation (apimachinery's validate/content),
# which the scheduling.k8s.io types use: lengths in bytes, and a DNS label with dots
# told apart from one with other bad characters.


def _content_regex_msg(msg: str, regex: str, *examples: str) -> str:
    quoted = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {quoted}regex used for validation is '{regex}')"


_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_CONTENT_DNS1123_LABEL_MSG = _content_regex_msg(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    _LABEL_FMT,
    "my-name",
    "123-abc",
)
_CONTENT_DNS1123_SUBDOMAIN_MSG = _content_regex_msg(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character",
    _SUBDOMAIN_FMT,
    "example.com",
)
_CONTENT_LABEL_KEY_MSG = _content_regex_msg(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character",
    _LABEL_KEY_FMT,
    "MyName",
    "my.name",
    "123-abc",
)


def content_dns1123_label_errors(value: str) -> list[str]:
    """A DNS label (a ShortName), worded as Kubernetes' declarative validation words it."""
    msgs: list[str] = []
    if len(value.encode()) > DNS1123_LABEL_MAX:
        msgs.append(f"must be no more than {DNS1123_LABEL_MAX} bytes")
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            msgs.append("must not contain dots")
        else:
            msgs.append(_CONTENT_DNS1123_LABEL_MSG)
    return msgs


def content_dns1123_subdomain_errors(value: str) -> list[str]:
    """A DNS subdomain (a LongName), worded as Kubernetes' declarative validation."""
    msgs: list[str] = []
    if len(value.encode()) > DNS1123_SUBDOMAIN_MAX:
        msgs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} bytes")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        msgs.append(_CONTENT_DNS1123_SUBDOMAIN_MSG)
    return msgs


def content_label_key_errors(value: str) -> list[str]:
    """A label key (optional DNS subdomain prefix, '/', a name), worded as Kubernetes'
    declarative validation."""
    msgs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            msgs.append("prefix part must be non-empty")
        else:
            msgs.extend("prefix part " + m for m in content_dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _CONTENT_LABEL_KEY_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name.encode()) > QUALIFIED_NAME_MAX:
        msgs.append(f"name part must be no more than {QUALIFIED_NAME_MAX} bytes")
    if not _QUALIFIED_NAME.fullmatch(name):
        msgs.append("name part " + _CONTENT_LABEL_KEY_MSG)
    return msgs
