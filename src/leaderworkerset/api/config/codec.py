"""The Configuration's file form: strict YAML decoding and rendering.

Decoding is strict like the Go manager's: an unknown or duplicated field is an error
naming it, and a value of the wrong type names the field and the type it wanted.
No defaults are applied here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from leaderworkerset.api.config.types import API_VERSION, KIND, Configuration, json_name
from leaderworkerset.api.go.durations import Duration, parse_duration


class ConfigError(ValueError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """YAML whose mappings may not repeat a key (Go's strict decoding rejects that)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise ConfigError(f'strict decoding error: duplicate field "{key}"')
        seen.add(key)
    return dict(loader.construct_mapping(node))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _decode(cls: type, data: Any, path: str, unknown: list[str]) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f'cannot decode {_type_name(data)} into "{path or "Configuration"}"')
    hints = get_type_hints(cls)
    by_json = {json_name(f.name): f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in data.items():
        where = f"{path}.{key}" if path else str(key)
        spec = by_json.get(key)
        if spec is None:
            unknown.append(where)
            continue
        values[spec.name] = _decode_value(hints[spec.name], raw, where, unknown)
    return cls(**values)


def _decode_value(hint: Any, raw: Any, where: str, unknown: list[str]) -> Any:
    if get_origin(hint) is not None and type(None) in get_args(hint):  # Optional[...]
        if raw is None:
            return None
        hint = next(a for a in get_args(hint) if a is not type(None))
    if raw is None:
        return None if dataclasses.is_dataclass(hint) else _zero(hint)
    if dataclasses.is_dataclass(hint):
        return _decode(hint, raw, where, unknown)  # type: ignore[arg-type]
    if get_origin(hint) is list:
        if not isinstance(raw, list):
            raise _type_error(where, raw, "[]string")
        return [
            _decode_value(get_args(hint)[0], item, f"{where}[{i}]", unknown)
            for i, item in enumerate(raw)
        ]
    if get_origin(hint) is dict:
        key_hint, value_hint = get_args(hint)
        if not isinstance(raw, dict):
            raise _type_error(where, raw, f"map[string]{_GO_SCALARS[value_hint]}")
        out = {}
        for key, item in raw.items():
            if not isinstance(key, str):  # YAML allows `1: true`; a Go map[string] does not
                raise _type_error(where, key, f"map[string]{_GO_SCALARS[value_hint]}")
            out[_decode_scalar(key_hint, key, where)] = _decode_value(
                value_hint, item, f"{where}.{key}", unknown
            )
        return out
    if hint is Duration:
        return _decode_duration(raw, where)
    return _decode_scalar(hint, raw, where)


def _decode_duration(raw: Any, where: str) -> Duration:
    if not isinstance(raw, str):
        raise _type_error(where, raw, "duration")
    try:
        return Duration(parse_duration(raw))
    except ValueError as exc:
        raise ConfigError(f'invalid "{where}": {exc}') from None


def _decode_scalar(hint: Any, raw: Any, where: str) -> Any:
    if hint is bool:
        if not isinstance(raw, bool):
            raise _type_error(where, raw, "bool")
        return raw
    if hint is int:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or int(raw) != raw:
            raise _type_error(where, raw, "int")
        return int(raw)
    if hint is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise _type_error(where, raw, "float")
        return float(raw)
    if hint is str:
        if not isinstance(raw, str):
            raise _type_error(where, raw, "string")
        return raw
    raise TypeError(f"no decoder for {hint!r}")


_GO_SCALARS = {bool: "bool", int: "int", float: "float64", str: "string"}


def _zero(hint: Any) -> Any:
    origin = get_origin(hint)
    if origin is list:
        return []
    if origin is dict:
        return {}
    return {bool: False, int: 0, float: 0.0, str: ""}.get(hint)


def _type_error(where: str, raw: Any, want: str) -> ConfigError:
    return ConfigError(f'cannot unmarshal {_type_name(raw)} into field "{where}" of type {want}')


def decode_configuration(text: str) -> Configuration:
    """Strictly decode a configuration document (no defaults applied)."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse the configuration: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a mapping")
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not kind:
        raise ConfigError("Object 'Kind' is missing in the configuration")
    if api_version != API_VERSION or kind != KIND:
        raise ConfigError(
            f'no kind "{kind}" is registered for version "{api_version}": '
            f"want kind {KIND} of {API_VERSION}"
        )
    unknown: list[str] = []
    cfg = _decode(Configuration, data, "", unknown)
    if unknown:
        raise ConfigError(
            "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        )
    assert isinstance(cfg, Configuration)
    return cfg


def configuration_yaml(cfg: Configuration) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
