"""The catalog's shape (docs/LOADING.md, "The catalog"): one object per role over one engine,
none of them a grab-bag. Pure: no MySQL (the roles' behaviour is tests/test_catalog.py's)."""

from __future__ import annotations

import inspect
import typing

from debl.catalog import Catalog

MAX_PUBLIC_METHODS = 20
ROLES = ("loads", "files", "phases", "index", "jobs", "serving", "probes")


def _public_methods(cls: type) -> list[str]:
    return [name for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and callable(member)]


def _role_classes() -> dict[str, type]:
    """Each role of a ``Catalog`` and its class, as the class declares them."""
    return {name: cls for name, cls in typing.get_type_hints(Catalog).items()
            if name in ROLES}


def test_every_role_is_an_object_of_at_most_20_public_methods():
    classes = _role_classes()
    assert set(classes) == set(ROLES)
    for role, cls in classes.items():
        methods = _public_methods(cls)
        assert 0 < len(methods) <= MAX_PUBLIC_METHODS, (role, cls.__name__, methods)
    assert len(_public_methods(Catalog)) <= MAX_PUBLIC_METHODS


def test_a_role_shares_the_engine_by_composition_not_inheritance():
    for cls in _role_classes().values():
        assert cls.__bases__ == (object,), cls
    assert Catalog.__bases__ == (object,)


def test_no_method_is_in_two_roles():
    seen: dict[str, str] = {}
    for role, cls in _role_classes().items():
        for name in _public_methods(cls):
            assert name not in seen, f"{name} is in both {seen[name]} and {role}"
            seen[name] = role
