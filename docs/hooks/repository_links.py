"""MkDocs hook: links from the manual to files of the repository outside ``docs/`` (a
benchmark's result table, a README, a test) are checked and carried into the site.

Pages link to such files by relative path (``../benchmarks/results/scale.md``), which
reads right on a forge; MkDocs knows only ``docs/`` and would report every one as broken.
Here each link that leaves ``docs/`` is resolved against the repository: a target that
does not exist fails the build (strict mode), one that does is copied as it is into the
site under ``repository/`` and the link pointed there.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

SITE_FOLDER = "repository"
# [text](target) and [text](target "title"), not images' sizes or code spans.
LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\s+\"[^\"]*\")?\)")


class RepositoryFile(File):
    """A repository file copied into the site as it is: never rendered as a page, even a
    Markdown one (its own links point into the repository, not the site)."""

    def is_documentation_page(self) -> bool:
        return False


def on_page_markdown(
    markdown: str, page: Page, config: MkDocsConfig, files: Files, **_: Any
) -> str:
    repository = Path(config.config_file_path).parent
    docs = Path(config.docs_dir).relative_to(repository).as_posix()
    folder = posixpath.dirname(page.file.src_uri)

    def carried(match: re.Match[str]) -> str:
        opening, target, anchor, title = match.groups()
        in_repository = posixpath.normpath(posixpath.join(docs, folder, target))
        if in_repository.startswith("../") or not (repository / in_repository).is_file():
            raise PluginError(f"{page.file.src_uri} links to {target}, which does not exist")
        site_path = f"{SITE_FOLDER}/{in_repository}"
        if files.get_file_from_path(site_path) is None:
            source = str(repository / in_repository)
            files.append(RepositoryFile.generated(config, site_path, abs_src_path=source))
        relative = posixpath.relpath(site_path, folder or ".")
        return f"{opening}{relative}{anchor or ''}{title or ''})"

    return LINK.sub(carried, markdown)
