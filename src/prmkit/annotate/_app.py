"""The labeling app as an ASGI app (Starlette): pages, the rating API, log-in and CSRF.

Pages (HTML): ``GET /login`` and ``POST /login`` (a token from ``prmkit annotate add-user`` opens a
session cookie), ``POST /logout``, ``GET /next`` (the next trace of the queue, taken for the
annotator), ``GET /label/{item}`` (one trace), ``POST /label/{item}/finish`` (note, flag, done),
``GET /admin`` (progress, agreement, cost; admins only). A page asked for without a session answers
401 with the log-in form.

API (JSON): ``POST /api/rate`` ``{"item", "step", "value", "seconds"?, "trace_seconds"?}`` stores one
rating at once (``{"saved": true, "changed": bool}``); ``GET /api/summary`` (admins) is
:class:`~prmkit.annotate.AnnotationSummary`. A client signs in with the session cookie plus the page's
CSRF token in ``X-CSRF-Token``, or with ``Authorization: Bearer TOKEN`` (no cookie, so no CSRF token).
Errors are ``{"error": message}``: 401 (no or wrong session or token), 403 (a missing or wrong CSRF
token, or not an admin), 404 (no such item), 400 (a step the trace does not have, a value other than
-1 / 0 / 1, malformed JSON), 413 (a body over 64 KiB).

The CSRF token of a session is an HMAC of its session id, so it needs no storage and an attacker who
cannot read the cookie cannot make it; the log-in form uses a double-submit cookie instead.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from prmkit.annotate._page import CSS, SCRIPT, admin_page, label_page, login_page, message_page
from prmkit.annotate._store import SESSION_DAYS, Store, User
from prmkit.annotate._summary import summarize
from prmkit.errors import MissingDependencyError

__all__ = ["AppConfig", "create_app", "SESSION_COOKIE"]

SESSION_COOKIE = "prmkit_annotate"
_LOGIN_COOKIE = "prmkit_annotate_login"
_MAX_BODY = 64 * 1024
_HEADERS = {
    # No inline script, no other origin: an injected <script> cannot run even if escaping failed.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass
class AppConfig:
    """The app's settings: ``show_answer`` shows each problem's reference answer to annotators;
    ``secure_cookies`` marks the session cookie Secure (behind HTTPS)."""

    show_answer: bool = False
    secure_cookies: bool = False


class _Failure(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def csrf_token(sid: str) -> str:
    """The CSRF token of a session: HMAC-SHA256 of the session id."""
    return hmac.new(sid.encode(), b"prmkit-annotate-csrf", hashlib.sha256).hexdigest()


async def read_form(request: Any) -> dict[str, str]:
    """A urlencoded form's fields (the first value of each); the pages post nothing else, so no
    multipart parser is needed."""
    body = await request.body()
    if len(body) > _MAX_BODY:
        raise _Failure(413, f"form of {len(body)} bytes; the limit is {_MAX_BODY}")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        raise _Failure(400, "the form is not valid UTF-8") from None
    out: dict[str, str] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


def create_app(store: Store, config: AppConfig | None = None) -> Any:
    """The Starlette app serving ``store``."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
        from starlette.routing import Route
    except ImportError:
        raise MissingDependencyError("starlette", "annotate", "prmkit annotate serve") from None
    from starlette.concurrency import run_in_threadpool

    cfg = config or AppConfig()

    def html(text: str, status: int = 200) -> Response:
        return HTMLResponse(text, status_code=status, headers=_HEADERS)

    def session(request: Request) -> tuple[User | None, str]:
        sid = request.cookies.get(SESSION_COOKIE, "")
        return (store.session_user(sid) if sid else None), sid

    def login_form(message: str | None = None, status: int = 200) -> Response:
        token = secrets.token_urlsafe(16)
        resp = html(login_page(token, message), status)
        resp.set_cookie(_LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=cfg.secure_cookies)
        return resp

    async def page_user(request: Request) -> tuple[User | None, str]:
        return await run_in_threadpool(session, request)

    async def form_of(request: Request, sid: str) -> dict[str, str]:
        form = await read_form(request)
        if not sid or not hmac.compare_digest(str(form.get("csrf", "")), csrf_token(sid)):
            raise _Failure(403, "missing or wrong CSRF token: reload the page")
        return form

    async def index(request: Request) -> Response:
        return RedirectResponse("/next", status_code=303)

    async def login_get(request: Request) -> Response:
        return login_form()

    async def login_post(request: Request) -> Response:
        form = await read_form(request)
        given, cookie = str(form.get("csrf", "")), request.cookies.get(_LOGIN_COOKIE, "")
        if not cookie or not hmac.compare_digest(given, cookie):
            return login_form("The log-in form expired: log in again.", 403)
        user = await run_in_threadpool(store.user_by_token, str(form.get("token", "")).strip())
        if user is None:
            return login_form("Wrong token.", 401)
        sid = await run_in_threadpool(store.new_session, user)
        resp = RedirectResponse("/next", status_code=303, headers=_HEADERS)
        resp.set_cookie(SESSION_COOKIE, sid, max_age=SESSION_DAYS * 86400, httponly=True, samesite="strict",
                        secure=cfg.secure_cookies)
        resp.delete_cookie(_LOGIN_COOKIE)
        return resp

    async def logout(request: Request) -> Response:
        user, sid = await page_user(request)
        if user is not None:
            await form_of(request, sid)
            await run_in_threadpool(store.end_session, sid)
        resp = RedirectResponse("/login", status_code=303, headers=_HEADERS)
        resp.delete_cookie(SESSION_COOKIE)
        return resp

    async def next_item(request: Request) -> Response:
        user, sid = await page_user(request)
        if user is None:
            return login_form("Log in to label.", 401)
        item_id = await run_in_threadpool(store.next_item, user)
        if item_id is None:
            return html(message_page("Nothing to label", "Your queue is empty: every queued trace has its "
                                     "annotators. Thank you!", user=user.name, admin=user.admin,
                                     csrf=csrf_token(sid)))
        return RedirectResponse(f"/label/{item_id}", status_code=303, headers=_HEADERS)

    def render_item(user: User, sid: str, item_id: int) -> tuple[str, int]:
        item = store.item(item_id)
        if item is None:
            return message_page("No such trace", f"There is no item {item_id}.", user=user.name,
                                admin=user.admin, csrf=csrf_token(sid)), 404
        mine = {r.step: r.value for r in store.ratings(item_id, user)}
        held = [a for a in store.assignments(item_id) if a.annotator == user.name]
        queue = store.queue()
        done = {a.item_id for a in store.assignments() if a.annotator == user.name and a.done is not None}
        remaining = sum(1 for i, _ in queue if i not in done and i != item_id)
        t = item.trace
        return label_page(item_id=item_id, trace_id=t.id, problem=t.problem.text,
                          answer=t.problem.answer if cfg.show_answer else None, steps=[s.text for s in t.steps],
                          ratings=mine, note=held[0].note if held else None, flag=held[0].flag if held else None,
                          trace_seconds=held[0].seconds if held else 0.0, user=user.name, admin=user.admin,
                          csrf=csrf_token(sid), remaining=remaining), 200

    async def label(request: Request) -> Response:
        user, sid = await page_user(request)
        if user is None:
            return login_form("Log in to label.", 401)
        text, status = await run_in_threadpool(render_item, user, sid, request.path_params["item"])
        return html(text, status)

    async def finish(request: Request) -> Response:
        user, sid = await page_user(request)
        if user is None:
            return login_form("Log in to label.", 401)
        form = await form_of(request, sid)
        item_id = request.path_params["item"]
        flag = str(form.get("flag", "")) or None
        try:
            seconds = float(form.get("trace_seconds", "0") or 0)
        except ValueError:
            raise _Failure(400, "trace_seconds: not a number") from None
        note = str(form.get("note", ""))
        missing = await run_in_threadpool(unrated, user, item_id)
        if missing is not None and flag is None:
            return html(message_page("Not finished", f"Step {missing + 1} has no rating yet: rate every step "
                                     "(or up to the first wrong one, with 'stop at the first wrong step'), "
                                     "or flag the problem.", user=user.name, admin=user.admin,
                                     csrf=csrf_token(sid)), 400)
        await run_in_threadpool(lambda: store.finish(user, item_id, note=note, flag=flag, trace_seconds=seconds))
        return RedirectResponse("/next", status_code=303, headers=_HEADERS)

    def unrated(user: User, item_id: int) -> int | None:
        """The first step ``user`` still has to rate before the trace is finished: every step, or every
        step up to the first wrong one; None when there is none."""
        item = store.item(item_id)
        if item is None:
            raise _Failure(404, f"no item {item_id}")
        mine = {r.step: r.value for r in store.ratings(item_id, user)}
        for i in range(len(item.trace.steps)):
            if i not in mine:
                return i
            if mine[i] == -1:
                return None
        return None

    async def api_user(request: Request) -> User:
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            user = await run_in_threadpool(store.user_by_token, token.strip()) if scheme.lower() == "bearer" else None
            if user is None:
                raise _Failure(401, "wrong bearer token (send Authorization: Bearer TOKEN)")
            return user
        user, sid = await page_user(request)
        if user is None:
            raise _Failure(401, "not logged in: send a session cookie or Authorization: Bearer TOKEN")
        if not hmac.compare_digest(request.headers.get("x-csrf-token", ""), csrf_token(sid)):
            raise _Failure(403, "missing or wrong CSRF token (X-CSRF-Token)")
        return user

    async def json_body(request: Request) -> dict[str, Any]:
        body = await request.body()
        if len(body) > _MAX_BODY:
            raise _Failure(413, f"body of {len(body)} bytes; the limit is {_MAX_BODY}")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise _Failure(400, f"body: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise _Failure(400, "body: must be a JSON object")
        return data

    async def api_rate(request: Request) -> Response:
        user = await api_user(request)
        data = await json_body(request)
        for name in ("item", "step", "value"):
            if name not in data:
                raise _Failure(400, f"{name}: missing")
        item_id = data["item"]
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            raise _Failure(400, f"item: an item id is an integer, got {item_id!r}")
        try:
            changed = await run_in_threadpool(lambda: store.rate(
                user, item_id, data["step"], data["value"], seconds=data.get("seconds", 0.0),
                trace_seconds=data.get("trace_seconds")))
        except LookupError as e:
            raise _Failure(404, str(e).strip("'\"")) from None
        except (ValueError, TypeError) as e:
            raise _Failure(400, str(e)) from None
        return JSONResponse({"saved": True, "changed": changed}, headers=_HEADERS)

    async def admin(request: Request) -> Response:
        user, sid = await page_user(request)
        if user is None:
            return login_form("Log in to see the admin page.", 401)
        if not user.admin:
            return html(message_page("Admins only", "This page is for admins (prmkit annotate add-user --admin).",
                                     user=user.name, csrf=csrf_token(sid)), 403)
        summary = await run_in_threadpool(summarize, store)
        runs = await run_in_threadpool(store.queue_runs)
        return html(admin_page(summary.lines(), summary.to_dict(), runs, user=user.name, csrf=csrf_token(sid)))

    async def api_summary(request: Request) -> Response:
        user = await api_user(request)
        if not user.admin:
            raise _Failure(403, "admins only")
        summary = await run_in_threadpool(summarize, store)
        return JSONResponse(summary.to_dict(), headers=_HEADERS)

    async def static_js(request: Request) -> Response:
        return Response(SCRIPT, media_type="text/javascript", headers=_HEADERS)

    async def static_css(request: Request) -> Response:
        return Response(CSS, media_type="text/css", headers=_HEADERS)

    async def failure(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Failure)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=_HEADERS)
        return html(message_page("Refused", exc.message), exc.status)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        message = getattr(exc, "detail", "error")
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status, headers=_HEADERS)
        return html(message_page("Error", str(message)), status)

    from starlette.exceptions import HTTPException

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/login", login_get, methods=["GET"]),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/next", next_item, methods=["GET"]),
        Route("/label/{item:int}", label, methods=["GET"]),
        Route("/label/{item:int}/finish", finish, methods=["POST"]),
        Route("/admin", admin, methods=["GET"]),
        Route("/api/rate", api_rate, methods=["POST"]),
        Route("/api/summary", api_summary, methods=["GET"]),
        Route("/static/annotate.js", static_js, methods=["GET"]),
        Route("/static/annotate.css", static_css, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={_Failure: failure, HTTPException: http_error})
    app.state.store = store
    return app
