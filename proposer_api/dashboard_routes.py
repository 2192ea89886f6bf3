"""`GET /dashboard`: one self-contained HTML page (inline CSS and JS, nothing fetched from elsewhere) that polls the
JSON routes and draws a run's curves and a buffer browser.

The parts live in `proposer_api/dashboard/` (package data) and are inlined once, at first request. Each response
carries a fresh CSP nonce: only the page's own <script> and <style> run, so even a mistake in escaping entry text
could not execute anything, and the page can talk to this server only.
"""

from __future__ import annotations

import functools
import secrets
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

DASHBOARD_PACKAGE = "proposer_api.dashboard"
"""Where page.html, style.css and the scripts are."""

DASHBOARD_SCRIPTS = ("highlight.js", "charts.js", "browser.js", "main.js")
"""Inlined in this order into one strict-mode function scope (main.js starts the page)."""

NONCE_MARK = "__AZR_NONCE__"
STYLE_MARK = "/*__AZR_STYLE__*/"
SCRIPT_MARK = "__AZR_SCRIPT__"


def _part(name: str) -> str:
    return resources.files(DASHBOARD_PACKAGE).joinpath(name).read_text(encoding="utf-8")


@functools.cache
def dashboard_template() -> str:
    """page.html with the stylesheet and the scripts inlined; NONCE_MARK is left for `render_dashboard`."""
    style = _part("style.css")
    script = "(() => {\n\"use strict\";\n" + "\n".join(_part(name) for name in DASHBOARD_SCRIPTS) + "\n})();"
    for name, text in (("style.css", style), ("scripts", script)):
        # Inlined text must not end its own element early nor carry a mark that would be substituted inside it.
        if "</" + ("style" if name == "style.css" else "script") in text.lower() or NONCE_MARK in text:
            raise RuntimeError(f"dashboard {name} cannot be inlined: it contains a closing tag or {NONCE_MARK}")
    page = _part("page.html")
    if page.count(STYLE_MARK) != 1 or page.count(SCRIPT_MARK) != 1:
        raise RuntimeError("dashboard page.html must hold the style and the script mark once each")
    return page.replace(STYLE_MARK, style).replace(SCRIPT_MARK, script)


def content_security_policy(nonce: str) -> str:
    """This page's policy: its own nonce'd script and style, JSON from this origin, nothing else."""
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def dashboard_router() -> APIRouter:
    """`GET /dashboard` (no token: it shows only what the read-only JSON routes show)."""
    router = APIRouter(tags=["dashboard"])

    @router.get("/dashboard", response_class=HTMLResponse)
    async def dashboard() -> HTMLResponse:
        """The live dashboard page."""
        nonce = secrets.token_urlsafe(18)
        headers = {"Content-Security-Policy": content_security_policy(nonce), "Cache-Control": "no-store",
                   "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
        return HTMLResponse(dashboard_template().replace(NONCE_MARK, nonce), headers=headers)

    return router
