"""The building blocks of the API's models: JSON's types as pydantic reads them, the three
kinds of model (a closed request, a closed answer, an open document), and `derived_model`,
which makes the pydantic model of a typed dict of `tracefix.collector.contracts`."""
from __future__ import annotations

import types
from typing import Annotated, Any, Optional, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

JSONValue = Any  # any JSON value: what an agent returned, a tool's result, a tracked object's state


def whole_number(value: Any) -> Any:
    """15596.0 as the integer 15596: JSON has one number type, and JSON Schema's "integer"
    (what the published schema says) admits any number without a fraction."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer field, validated as the published schema reads it: a whole number (15596 or
# 15596.0), never a bool or a string of digits (request bodies are validated strictly).
# Bounds go before the validator (`Annotated[int, Field(ge=0), BeforeValidator(...)]`):
# after it, pydantic leaves them out of the JSON Schema's minimum and maximum.
JSONInt = Annotated[int, BeforeValidator(whole_number)]


class ClosedRequest(BaseModel):
    """A request whose fields are all named here (unknown fields are ignored, as they always were)."""
    model_config = ConfigDict(extra="ignore", defer_build=True)


class ClosedAnswer(BaseModel):
    """An answer whose fields are all named here: the published schema admits no others."""
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OpenDocument(BaseModel):
    """A document that may carry fields beyond those named here."""
    model_config = ConfigDict(extra="allow", defer_build=True)


def derived_model(contract: type, base: type[BaseModel], *, outline: bool = False, name: str | None = None,
                  omit: tuple[str, ...] = (), models: dict[type, type[BaseModel]] | None = None,
                  describe: dict[str, str] | None = None, **more: Any) -> type[BaseModel]:
    """The pydantic model of the typed dict `contract`: its fields with their types and
    docstring, on `base`. Typed dicts nested in a field become models the same way, unless
    `models` names the model to use for one. `outline`: only the outline is checked, as the
    API checks a posted result: every field may be missing or null, and a typed dict nested
    in a field is any JSON object (the store keeps the result as posted; what is inside is
    for its readers to judge, and a report survives junk there).
    `omit` leaves fields out; `more` adds fields (pydantic's `(type, default)` pairs)."""
    models = {} if models is None else models
    hints = get_type_hints(contract)

    def convert(tp: Any) -> Any:
        if tp is int:
            return JSONInt
        if is_typeddict(tp):
            if outline:
                return dict[str, JSONValue]
            if tp not in models:
                models[tp] = derived_model(tp, base, models=models)
            return models[tp]
        origin = get_origin(tp)
        if origin is list:
            return list[convert(get_args(tp)[0])]
        if origin is dict:
            key, value = get_args(tp)
            return dict[key, convert(value)]
        if origin in (Union, types.UnionType):
            return Union[tuple(convert(a) for a in get_args(tp))]
        return tp

    fields: dict[str, Any] = {}
    for field, tp in hints.items():
        if field in omit:
            continue
        kind = convert(tp)
        required = field in contract.__required_keys__ and not outline
        info = Field(... if required else None, description=(describe or {}).get(field))
        fields[field] = (kind if required else Optional[kind], info)
    return create_model(name or contract.__name__, __base__=base, __doc__=contract.__doc__,
                        __module__=__name__, **fields, **more)
