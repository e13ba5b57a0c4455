"""A query's arguments are bounded to what every store takes: id1 and link_type in
0..2^63-1 (docs/LOADING.md, row "Integers in the input"), min_time and max_time in 0..2^63-1,
offset and limit in 0..2^63-1. Past a bound the answer is a ValueError naming the argument,
never a store's own error (``struct.error`` from the HBase row key, a MySQL syntax error),
and ``debl links`` says so without a traceback. At the bounds, the real MySQL and HBase
answer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from debl.cli import main
from debl.config import Config
from debl.format.link import MAX_TIME, Link, Origin, check_query

TOP = (1 << 63) - 1
FINE = dict(id1=1, link_type=1, min_time=0, max_time=MAX_TIME, offset=0, limit=10)


@pytest.mark.parametrize("name, value", [
    ("id1", TOP + 1), ("id1", 1 << 64), ("id1", -1),
    ("link_type", TOP + 1), ("link_type", 1 << 64), ("link_type", -1),
    ("min_time", TOP + 1), ("min_time", -1), ("max_time", TOP + 1), ("max_time", -1),
    ("offset", 1 << 64), ("offset", -1), ("limit", 1 << 64), ("limit", -1),
    pytest.param("limit", 10 ** 400, id="limit-10^400"),
])
def test_an_argument_past_its_range_is_a_value_error_naming_it(name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer from 0 to {TOP} "):
        check_query(**{**FINE, name: value})


def test_every_bound_itself_is_accepted():
    check_query(TOP, TOP, TOP, TOP, TOP, TOP)
    check_query(0, 0, 0, 0, 0, 0)
    check_query(5, 5, MAX_TIME, 0, 0, 1)  # an empty window is a valid question


@pytest.mark.parametrize("args", [
    ["1", str(1 << 64)], [str(TOP + 1), "1"], ["1", "1", "--limit", str(1 << 64)],
    ["1", "1", "--offset", str(10 ** 30)], ["1", "1", "--min-time", str(TOP + 1)],
])
def test_debl_links_refuses_an_argument_past_its_range_without_a_traceback(args):
    # A config whose MySQL is nowhere: only the arguments' check can answer, and at once.
    nowhere = Config(mysql_port=1, mysql_password="x", service_timeout=2.0)
    result = CliRunner().invoke(main, ["links", *args], obj=nowhere)
    assert result.exit_code == 2, result.output  # click's usage error: nothing was asked
    assert f"is not in the range 0<=x<={TOP}" in result.output


@pytest.fixture(scope="module", params=["mysql", "hbase"])
def real_store(request, stack_config):
    if request.param == "mysql":
        from debl.store.mysql import MySQLStore
        store = MySQLStore(stack_config, table="bounds_links")
    else:
        from debl.store.hbase import HBaseStore
        store = HBaseStore(stack_config, table="bounds_links")
    with store:
        store.reset()
        yield store
        store.drop_table()


@pytest.mark.stack
def test_real_stores_answer_at_the_bounds_and_refuse_past_them(real_store):
    edge = Link(TOP, TOP, TOP, 1, b"edge", MAX_TIME, TOP)
    real_store.write_links([(edge, Origin(0, 0, 1))])
    assert real_store.get_link_list(TOP, TOP, 0, MAX_TIME, 0, TOP) == [edge]
    assert real_store.get_link_list(TOP, TOP, MAX_TIME, MAX_TIME, 0, 1) == [edge]
    assert real_store.get_link_list(TOP, TOP, 0, MAX_TIME, TOP, TOP) == []
    for past in (dict(link_type=1 << 64), dict(id1=TOP + 1), dict(limit=1 << 64),
                 dict(offset=10 ** 30), dict(min_time=1 << 64)):
        args = {**FINE, **past}
        with pytest.raises(ValueError, match=f"^{next(iter(past))} must be"):
            real_store.get_link_list(*args.values())
