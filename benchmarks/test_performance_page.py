"""The tables of docs/performance.md and spark_examples/README.md are the result files'
figures, as written by ``python -m benchmarks.performance_page``: a result file run anew, or a
table edited by hand, fails here until the page is written again."""

from __future__ import annotations

import re

import pytest

from benchmarks import performance_page


def test_every_table_of_the_pages_is_written_from_its_result_file() -> None:
    names = []
    for path in performance_page.PAGES:
        page = path.read_text(encoding="utf-8")
        names += re.findall(r"<!-- table: ([a-z_]+) -->", page)
        assert performance_page.rendered(page) == page, path

    assert sorted(names) == sorted(performance_page.TABLES)


def test_a_table_typed_by_hand_is_found() -> None:
    page = performance_page.PAGE.read_text(encoding="utf-8")
    edited = re.sub(r"(\| confluent-kafka produce 1 KiB \| )[0-9,]+", r"\g<1>999,999", page)

    assert edited != page
    assert performance_page.rendered(edited) == page
    assert performance_page.main(["--check"]) == 0


def test_an_unknown_table_name_is_refused() -> None:
    with pytest.raises(KeyError):
        performance_page.rendered("<!-- table: nothing_writes_this -->\n<!-- end of table -->")
