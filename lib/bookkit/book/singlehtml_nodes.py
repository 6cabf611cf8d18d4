"""A Sphinx extension: the single-page builder (``make pdf``) renders every node the site does.

Sphinx looks up a builder's node visitors by the builder's name first and falls back to its
format ("html") only when no extension registered a visitor under that name. sphinx-exercise
registers its nodes for "singlehtml" explicitly, so the single-page builder then knows only
those, and sphinx-proof's theorems (registered for "html") fail to render there. This extension
gives "singlehtml" every "html" visitor it lacks, when that builder starts.
"""

from __future__ import annotations


def merge_html_visitors(app) -> None:
    """Copy the "html" visitors missing under "singlehtml" (the builder's own ones win)."""
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single.setdefault(node, visitors)


def setup(app) -> dict:
    app.connect("builder-inited", merge_html_visitors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
