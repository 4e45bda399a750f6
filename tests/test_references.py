"""docs/references.md lists everything the code and the manual cite: every KIP and RFC
named in kshim/, docs/ or README.md, and the papers kshim is built from, by the names the
code uses; nothing cites a source a reader of the repository cannot find."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "docs" / "references.md"
PAPERS = ("VENUS", "QMQ", "LSMQ")
# A citation of working material outside the repository ("seed 002", "the seeds").
UNREADABLE = re.compile(r"\bseeds?\s+\d+|\bof the seeds\b", re.IGNORECASE)


def cited_texts() -> dict[Path, str]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    paths += sorted((ROOT / "kshim").rglob("*.py"))
    return {path: path.read_text(encoding="utf-8") for path in paths if path != REFERENCES}


def test_every_kip_and_rfc_cited_is_listed() -> None:
    listed = REFERENCES.read_text(encoding="utf-8")
    missing = set()
    for path, text in cited_texts().items():
        for number in re.findall(r"\bKIP-(\d+)\b", text):
            if not re.search(rf"\| KIP-{number} \|", listed):
                missing.add(f"KIP-{number} ({path.relative_to(ROOT)})")
        for number in re.findall(r"\bRFC ?(\d{3,5})\b", text):
            if f"[RFC {number}]" not in listed:
                missing.add(f"RFC {number} ({path.relative_to(ROOT)})")
    assert not missing, sorted(missing)


def test_every_paper_named_has_a_section() -> None:
    listed = REFERENCES.read_text(encoding="utf-8")
    for paper in PAPERS:
        assert f"### {paper}\n" in listed
        assert any(paper in text for text in cited_texts().values()), paper


def test_nothing_cites_material_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path, text in cited_texts().items()
        for match in UNREADABLE.finditer(text)
    ]
    assert not found, found
