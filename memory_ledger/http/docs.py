"""What a person finds at the server's root: `GET /`, a pointer (name, version, links),
and the API documentation at `/docs` (Swagger UI) and `/redoc`, whose scripts and
styles are served from the installed package (`fastapi-offline` ships them), never
from a CDN: the docs work on a machine without the internet."""

from __future__ import annotations

import html
from importlib import metadata, resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles

#: Where the bundled Swagger UI and ReDoc files are served.
ASSETS = "/docs/assets"
#: The links of `GET /`: where to go next.
LINKS = {
    "docs": "/docs",
    "redoc": "/redoc",
    "openapi": "/openapi.json",
    "memories": "/v1/memories",
    "health": "/v1/health",
    "ready": "/v1/ready",
    "compliance": "/compliance",
}


def package_version() -> str:
    try:
        return metadata.version("memory-ledger")
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


def install(app: FastAPI) -> None:
    """Add `/`, `/docs`, `/docs/oauth2-redirect`, `/redoc` and the assets to `app`
    (created with `docs_url=None, redoc_url=None`)."""
    assets = resources.files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")
    title = f"{app.title} API"
    about: dict[str, Any] = {
        "name": "memory-ledger",
        "version": package_version(),
        "api_version": app.version,
        "links": LINKS,
    }
    page = _root_page(about).encode()

    @app.get("/", include_in_schema=False, response_model=None)
    def root(request: Request) -> Response:
        # A browser gets the links as a page; anything else as JSON.
        if "text/html" in request.headers.get("accept", ""):
            return Response(page, media_type="text/html; charset=utf-8")
        return JSONResponse(about)

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            oauth2_redirect_url="/docs/oauth2-redirect",
            # No spec validator badge: it would send the document to another host.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def _root_page(about: dict[str, Any]) -> str:
    items = "".join(
        f'<li><a href="{html.escape(url)}">{html.escape(name)}</a> <code>{html.escape(url)}'
        "</code></li>"
        for name, url in about["links"].items()
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f"<title>memory-ledger {html.escape(about['version'])}</title></head><body>"
        f"<h1>memory-ledger {html.escape(about['version'])}</h1>"
        "<p>Event-sourced memory for AI agents, with governed, provable forgetting. "
        "Every <code>/v1</code> call but health and readiness needs a bearer token "
        "(<code>memory-ledger tokens create</code>).</p>"
        f"<ul>{items}</ul></body></html>"
    )
