"""``agent-eval view``: a local web app over the store, every page one paged SQL query.

    >>> app = make_app(open_store("runs.db"))                    # doctest: +SKIP

Module map: ``links`` (URLs with their filters), ``overview`` (runs, run and compare
page contexts), ``lists`` (calls, sessions and session page contexts), ``trend`` (the
nightly trend as inline SVG), ``app`` (aiohttp routes, the store read-only, serving).
Pages render with the report's jinja2 templates (autoescape on) plus the ones under
``view/templates``; no script, no CDN, nothing but HTML and inline CSS and SVG.
"""

from agent_eval.view.app import bind, make_app, serve

__all__ = ["bind", "make_app", "serve"]
