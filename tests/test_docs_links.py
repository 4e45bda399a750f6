"""README.md and the manual in docs/: every relative link names a file of the checkout, and
every ``#anchor`` a heading of the page it points to (GitHub's heading anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OTHER_READMES = [
    "spark_examples/README.md",
    "compat_tests/README.md",
    "benchmarks/results/README.md",
]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *(ROOT / p for p in OTHER_READMES),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.*)")
INLINE_CODE = re.compile(r"`[^`]*`")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    return {anchor(m.group(1)) for line in prose(page) if (m := HEADING.match(line))}


def broken_links(page: Path) -> list[str]:
    broken = []
    for line in prose(page):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z]+:", target):
                continue  # a web address or mail link: not the checkout's
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{target}: no such file")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_of_the_page_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[here](#title) [gone](missing.md) [nowhere](#no-such)\n")
    assert broken_links(page) == ["missing.md: no such file", "#no-such: no such heading"]


def test_the_readme_stays_short() -> None:
    """Two screens to decide whether to try kshim; the manual is in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
