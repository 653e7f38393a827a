"""A single-page application for the renderer's tests: every page is the same HTML shell
whose script loads the page's article from a JSON endpoint and writes its title, text and
navigation links into the document (without a browser, a page has no text and no links)."""

from __future__ import annotations

import json

from sites import Page

SHELL = """<!DOCTYPE html><html><head><title>Loading…</title>
<script src="/static/app.js"></script></head>
<body><div id="app"></div><img src="/static/hero.png" alt=""></body></html>"""

APP = """
addEventListener('DOMContentLoaded', async () => {
  const name = location.pathname === '/' ? 'home' : location.pathname.split('/').pop();
  const article = await (await fetch('/api/' + name + '.json')).json();
  document.title = article.title;
  const links = article.links.map(l => '<a href="' + l.href + '">' + l.text + '</a>').join(' ');
  document.getElementById('app').innerHTML =
    '<h1>' + article.title + '</h1><p>' + article.text + '</p><nav>' + links + '</nav>';
  if (article.more) {  // a second request, after the first answer
    const more = await (await fetch(article.more)).json();
    document.getElementById('app').insertAdjacentHTML('beforeend', '<p>' + more.text + '</p>');
  }
});
"""


def spa(articles: dict[str, dict], delay: float = 0.0) -> dict[str, Page | str]:
    """The site: `articles` by page name ('home' is /, others /articles/NAME), each with a
    title, a text, links (hrefs) and optionally `more` (another JSON URL, answered from
    `articles` by its name too); JSON answers wait `delay` seconds."""
    pages: dict[str, Page | str] = {
        "/static/app.js": Page(APP, content_type="application/javascript"),
        "/static/hero.png": Page(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, content_type="image/png"),
    }
    for name, article in articles.items():
        pages["/" if name == "home" else f"/articles/{name}"] = Page(SHELL)
        body = {
            "title": article["title"],
            "text": article["text"],
            "links": [{"href": h, "text": h.rsplit("/", 1)[-1]} for h in article.get("links", [])],
            "more": article.get("more"),
        }
        pages[f"/api/{name}.json"] = Page(
            json.dumps(body), content_type="application/json", delay=delay
        )
    return pages
