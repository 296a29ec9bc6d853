"""Model fields whose values are sealed under their run's data key (core/sealing.py).

``save()``, ``create()``, ``bulk_create()`` and a raw insert that calls ``pre_save`` seal the
instance's value with the key of its run (``run_attr``: a dotted attribute path from the
instance to the run id); the instance keeps its plaintext in memory. ``update()``,
``bulk_update()``, lookups and raw statements have no instance: they take only values sealed by
``field_seal(Model, "field", run_id, value)`` and refuse plaintext (``PlaintextRefused``), so a
missed path fails loudly instead of writing personal data in the clear.

Reads open the value (instances, ``values()``, ``refresh_from_db``); a value whose key was
destroyed reads as ``ERASED`` (``is_erased``), and a legacy plaintext value is returned as is.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.fields.json import KeyTransform

from core.sealed_query import open_or_close
from core.sealing import (
    MARKER,
    ErasedDict,
    ErasedText,
    PlaintextRefused,
    Sealed,
    SealedText,
    is_envelope,
    seal,
    seal_text,
    unseal,
    unseal_text,
)


def _run_id_of(instance: Any, path: str) -> Any:
    value = instance
    for part in path.split("."):
        value = getattr(value, part)
    if value is None:
        raise PlaintextRefused(f"{type(instance).__name__}.{path} is empty: no run to seal under")
    return value


class _SealedMixin:
    run_attr: str
    label: str

    def _init_sealed(self, run_attr: str) -> None:
        self.run_attr = run_attr

    def contribute_to_class(self, cls: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().contribute_to_class(cls, name, *args, **kwargs)  # type: ignore[misc]
        self.label = f"{cls._meta.label}.{name}"

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()  # type: ignore[misc]
        kwargs["run_attr"] = self.run_attr
        return name, path, args, kwargs

    def _refuse(self, value: Any) -> None:
        raise PlaintextRefused(
            f"{self.label} holds personal data and takes only sealed values here "
            f"(save() seals; for update() and raw SQL use core.sealed_fields.field_seal)"
        )


class SealedJSONField(_SealedMixin, models.JSONField):
    def __init__(self, *args: Any, run_attr: str = "run_id", **kwargs: Any) -> None:
        self._init_sealed(run_attr)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: Any, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if value is None or isinstance(value, Sealed):
            return value
        if isinstance(value, ErasedDict):
            return value.sealed
        run_id = _run_id_of(model_instance, self.run_attr)
        return seal(run_id, value, label=self.label, fresh=add and self.run_attr == "id")

    def get_prep_value(self, value: Any) -> Any:
        if value is None or isinstance(value, Sealed):
            return value
        if isinstance(value, ErasedDict):
            return value.sealed
        self._refuse(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(expression, KeyTransform) or not is_envelope(value):
            return value
        return open_or_close(value, label=self.label, opener=unseal)


class SealedTextField(_SealedMixin, models.TextField):
    def __init__(self, *args: Any, run_attr: str = "run_id", **kwargs: Any) -> None:
        self._init_sealed(run_attr)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: Any, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if value is None or value == "" and not isinstance(value, ErasedText):
            return value
        if isinstance(value, SealedText):
            return value
        if isinstance(value, ErasedText):
            return value.sealed
        run_id = _run_id_of(model_instance, self.run_attr)
        return seal_text(run_id, value, label=self.label, fresh=add and self.run_attr == "id")

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, ErasedText):
            return value.sealed
        if value is None or value == "" or isinstance(value, SealedText):
            return value
        self._refuse(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or not value.startswith('{"' + MARKER):
            return value  # legacy plaintext reads as is
        return open_or_close(value, label=self.label, opener=unseal_text)


def field_seal(model: Any, name: str, run_id: Any, value: Any) -> Any:
    """``value`` sealed for ``model.name`` under the run's key: what update() and raw SQL take."""
    field = model._meta.get_field(name)
    if isinstance(field, SealedTextField):
        return seal_text(run_id, value, label=field.label)
    if isinstance(field, SealedJSONField):
        return seal(run_id, value, label=field.label)
    raise TypeError(f"{field.label if hasattr(field, 'label') else name} is not a sealed field")
