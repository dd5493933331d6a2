"""Registries filled by subclassing: a base class names its registry, and each subclass that sets ``name`` enters
it when it is defined (encoder kinds, encoder file formats, multi-agent layouts)."""

from __future__ import annotations

from typing import Any, ClassVar


class Registered:
    """Subclass with ``registry=<a dict>`` to make a registered base; its subclasses that set ``name`` are entered
    there by that name (a later one of the same name replaces the earlier)."""

    name: ClassVar[str]
    _registry: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, registry: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if registry is not None:
            cls._registry = registry
        elif "name" in cls.__dict__:
            cls._registry[cls.name] = cls
