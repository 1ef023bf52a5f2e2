"""Reading request fields: each helper names the field and says what was expected when it is wrong."""

from __future__ import annotations

from typing import Any

from .envelope import FIELDS_TYPE_ERROR, FIELDS_VALUE_ERROR, MISSING_FIELDS, ClearmlError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def required(data: dict[str, Any], name: str) -> Any:
    value = data.get(name)
    if value is None or value == "":
        raise ClearmlError(MISSING_FIELDS, f"missing required field: {name}", fields=[name])
    return value


def text(
    data: dict[str, Any],
    name: str,
    default: str | None = None,
    *,
    required_: bool = False,
    max_len: int = 10_000,
) -> str | None:
    value = required(data, name) if required_ else data.get(name, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be a string, got {type(value).__name__}", field=name)
    if len(value) > max_len:
        raise ClearmlError(FIELDS_VALUE_ERROR, f"'{name}' is longer than {max_len} characters", field=name)
    return value


def integer(
    data: dict[str, Any],
    name: str,
    default: int | None = None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    value = data.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be an integer, got {value!r}", field=name) from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be an integer, got {value!r}", field=name)
    if minimum is not None and value < minimum:
        raise ClearmlError(FIELDS_VALUE_ERROR, f"'{name}' must be at least {minimum}, got {value}", field=name)
    if maximum is not None and value > maximum:
        raise ClearmlError(FIELDS_VALUE_ERROR, f"'{name}' must be at most {maximum}, got {value}", field=name)
    return value


def number(data: dict[str, Any], name: str, default: float | None = None) -> float | None:
    value = data.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be a number, got {value!r}", field=name) from None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be a number, got {value!r}", field=name)
    return float(value)


def flag(data: dict[str, Any], name: str, default: bool = False) -> bool:
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be true or false, got {value!r}", field=name)


def choice(data: dict[str, Any], name: str, options: tuple[str, ...], default: str | None = None) -> str | None:
    value = data.get(name, default)
    if value is None or value == "":
        return default
    if value not in options:
        raise ClearmlError(
            FIELDS_VALUE_ERROR, f"'{name}' must be one of {', '.join(options)}, got {value!r}", field=name
        )
    return value


def strings(
    data: dict[str, Any],
    name: str,
    *,
    required_: bool = False,
    max_items: int | None = None,
    split_commas: bool = False,
) -> list[str] | None:
    value = required(data, name) if required_ else data.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")] if split_commas else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be a list of strings", field=name)
    if required_ and not value:
        raise ClearmlError(MISSING_FIELDS, f"'{name}' must not be empty", fields=[name])
    if max_items is not None and len(value) > max_items:
        raise ClearmlError(
            FIELDS_VALUE_ERROR, f"'{name}' holds at most {max_items} entries, got {len(value)}", field=name
        )
    return value


def objects(data: dict[str, Any], name: str, *, required_: bool = False) -> list[dict[str, Any]] | None:
    value = required(data, name) if required_ else data.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be a list of objects", field=name)
    return value


def mapping(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ClearmlError(FIELDS_TYPE_ERROR, f"'{name}' must be an object", field=name)
    return value
