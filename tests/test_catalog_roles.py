"""The catalog's shape (docs/LOADING.md, "The catalog"): one object per role over one engine,
none of them a grab-bag. Pure: no MySQL (the roles' behaviour is tests/test_catalog.py's)."""

from __future__ import annotations

import inspect
import re
import typing

import debl.catalog
from debl.catalog import METADATA, Catalog

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


def _docstring_tables(doc: str) -> list[str]:
    """The names in the first column of the package docstring's table of tables."""
    return re.findall(r"^(debl_\w+) ", doc, re.M)


def test_the_package_docstring_names_every_table_and_every_role():
    """debl.catalog's docstring is where a reader finds each table and each role: it names
    every table of METADATA once and nothing else, and every role a Catalog has (it listed 15
    of the 20 tables and no ``catalog.early`` once the tables of early answers came)."""
    doc = debl.catalog.__doc__
    assert sorted(_docstring_tables(doc)) == sorted(METADATA.tables)
    roles = set(typing.get_type_hints(Catalog))
    assert roles == set(re.findall(r"^``catalog\.(\w+)``", doc, re.M))


def test_the_docstring_check_sees_a_table_left_out():
    assert _docstring_tables("debl_loads             load: ...\n  debl_x in a sentence\n"
                             "debl_jobs              (load, bucket)\n") == ["debl_loads",
                                                                         "debl_jobs"]
