"""The route modules: each module of this package is one resource family, and declares its routes
as `routes` (an `api.routing.Routes`). The app mounts them in module name order and the OpenAPI
document lists their declarations; a new module is found here, with no list to edit."""

from __future__ import annotations

import importlib
import pkgutil

from api.routing import Routes


def route_modules() -> tuple[str, ...]:
    """The names of this package's modules, sorted."""
    return tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)))


def route_tables() -> tuple[Routes, ...]:
    """Every route module's `routes`, in module name order."""
    tables = []
    for name in route_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        routes = getattr(module, "routes", None)
        if not isinstance(routes, Routes):
            raise TypeError(f"{module.__name__} declares no `routes` (api.routing.Routes)")
        tables.append(routes)
    return tuple(tables)


__all__ = ["route_modules", "route_tables"]
