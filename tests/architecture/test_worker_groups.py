"""How the tests are shared out to pytest-xdist's workers (tests/conftest.py): the real-engine tests
in one group, every other module in its own, and a run whose groups did not hold stops."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import check_the_groups_held, group_for_workers


class FakeItem:
    def __init__(self, nodeid: str, real: bool = False, fixtures: tuple[str, ...] = ()) -> None:
        self.nodeid = nodeid
        self.keywords = {"real": True} if real else {}
        self.fixturenames = fixtures
        self.groups: list[str] = []

    def add_marker(self, mark) -> None:
        assert mark.name == "xdist_group"
        self.groups.append(mark.args[0])


def _config(loadgroup: bool) -> SimpleNamespace:
    return SimpleNamespace(option=SimpleNamespace(loadgroup=loadgroup))


def test_real_engine_tests_share_one_group_and_other_tests_their_modules():
    items = [
        FakeItem("tests/a/test_x.py::test_one"),
        FakeItem("tests/a/test_x.py::test_two[p]"),
        FakeItem("tests/a/test_x.py::test_real", real=True),
        FakeItem("tests/b/test_y.py::test_uses_the_server", fixtures=("served",)),
        FakeItem("tests/cluster/test_ray.py::test_one"),
        FakeItem("tests/cluster/test_shard.py::test_two"),
    ]
    group_for_workers(_config(True), items)
    assert [i.groups for i in items] == [
        ["tests/a/test_x.py"],
        ["tests/a/test_x.py"],
        ["real-engine"],
        ["real-engine"],
        ["tests/cluster/"],
        ["tests/cluster/"],
    ]


def test_without_xdist_groups_nothing_is_marked_and_nothing_is_checked():
    items = [FakeItem("tests/a/test_x.py::test_one")]
    group_for_workers(_config(False), items)
    check_the_groups_held(_config(False), items)
    assert items[0].groups == []


def test_a_run_whose_groups_did_not_hold_stops_with_what_to_do():
    held = [FakeItem("tests/a/test_x.py::test_one@tests/a/test_x.py")]
    check_the_groups_held(_config(True), held)
    lost = [*held, FakeItem("tests/a/test_x.py::test_two")]
    with pytest.raises(pytest.UsageError, match=r"pin pytest<9.2, or run with -n 0"):
        check_the_groups_held(_config(True), lost)
