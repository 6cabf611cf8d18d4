"""A Sphinx extension: every page's download menu offers its jupytext source (``.md``).

The site is rendered from executed notebooks, so the theme's download menu offers the
``.ipynb``. :func:`bookkit.book.render.prepare` copies each page's markdown source to
``_extra/_sources/<page>.md`` of the executed tree (``html_extra_path`` puts it at
``_sources/<page>.md`` of the site); this extension adds a ``.md`` entry beside the ``.ipynb``
one wherever that file exists.
"""

from __future__ import annotations

from pathlib import Path

EXTRA_SOURCES = Path("_extra") / "_sources"
BUTTON_LABEL = "download-markdown-button"


def add_markdown_download(app, pagename, templatename, context, doctree) -> None:
    if not (Path(app.srcdir) / EXTRA_SOURCES / f"{pagename}.md").exists():
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].insert(1, {
                "type": "link",
                "url": f"{context['pathto']('_sources', 1)}/{pagename}.md",
                "text": ".md",
                "tooltip": "Download the page's source (jupytext markdown)",
                "icon": "fas fa-file-lines",
                "label": BUTTON_LABEL,
            })


def setup(app):
    # After sphinx-book-theme's own header buttons (priority 501).
    app.connect("html-page-context", add_markdown_download, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
