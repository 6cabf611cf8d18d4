"""Where the repository is, for tooling and for pages that keep files in it.

Pages run in their folder of the output tree (``_build/nb/<profile>/book/...``), which may lie
outside the repository; a page parameter that names a folder of the repository, such as a
cache, is resolved with :func:`repository_path`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT_ENV", "find_root", "repository_path"]


def find_root(start: Path) -> Path:
    """The repository root: the nearest folder upwards that holds ``_toc.yml``."""
    for folder in (start, *start.parents):
        if (folder / "_toc.yml").exists():
            return folder
    raise FileNotFoundError(f"no _toc.yml in {start} or any parent folder")


ROOT_ENV = "BOOKKIT_ROOT"  # set by ``bookkit.book.execute`` for the kernels it starts


def repository_path(path: str | os.PathLike | None) -> Path | None:
    """``path`` relative to the repository root; an absolute path as it is, None as None.

    Pages run in their output folder, which may lie outside the repository, so a page
    parameter that names a folder of the repository (such as a cache) is resolved here: the
    root is ``$BOOKKIT_ROOT`` when set (the executor sets it), else :func:`find_root` of the
    working folder (a page opened in the repository).
    """
    if path is None:
        return None
    path = Path(path)
    if path.is_absolute():
        return path
    root = os.environ.get(ROOT_ENV)
    return (Path(root) if root else find_root(Path.cwd())) / path
