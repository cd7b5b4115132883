"""The labeling app through Starlette's TestClient: log-in, 401 / 403 / 400 / 404, CSRF, escaping,
finishing a trace, the admin page, and the address check."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from annotate_traces import scored_traces  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from prmkit.annotate import AppConfig, Store, check_bind, create_app  # noqa: E402
from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402


@pytest.fixture()
def app_store(tmp_path):
    store = Store(tmp_path / "labels.sqlite")
    traces = scored_traces()
    traces.append(Trace("x", Problem("<b>bold?</b>", answer="<i>42</i>"),
                        [Step("<script>window.pwned = 1</script>"), Step("a & b")]))
    ids = store.add_traces(traces)
    store.set_queue([(i, 1, None) for i in ids], strategy="file order")
    return store


def login(client, token):
    page = client.get("/login")
    form_csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/login", data={"csrf": form_csrf, "token": token})


def page_csrf(text):
    return re.search(r'data-csrf="([^"]+)"', text).group(1)


def test_missing_or_wrong_token_is_401(app_store):
    _, token = app_store.add_user("ann")
    client = TestClient(create_app(app_store))
    assert client.post("/api/rate", json={"item": 1, "step": 0, "value": 1}).status_code == 401
    r = client.post("/api/rate", json={"item": 1, "step": 0, "value": 1}, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and "wrong bearer token" in r.json()["error"]
    assert client.get("/next").status_code == 401 and "Log in" in client.get("/next").text
    assert login(client, "nope").status_code == 401
    assert login(client, token).status_code == 200  # followed to the labeling page


def test_bearer_api_rates_and_refuses_bad_steps(app_store):
    _, token = app_store.add_user("ann")
    client = TestClient(create_app(app_store))
    auth = {"Authorization": f"Bearer {token}"}
    ok = client.post("/api/rate", json={"item": 1, "step": 1, "value": -1, "seconds": 4}, headers=auth)
    assert ok.status_code == 200 and ok.json() == {"saved": True, "changed": True}
    again = client.post("/api/rate", json={"item": 1, "step": 1, "value": -1, "seconds": 4}, headers=auth)
    assert again.json() == {"saved": True, "changed": False}
    assert [(r.step, r.value, r.seconds) for r in app_store.ratings()] == [(1, -1, 4.0)]
    for body, status, words in [({"item": 1, "step": 2, "value": 1}, 400, "steps 0-1, not 2"),
                                ({"item": 1, "step": -1, "value": 1}, 400, "not -1"),
                                ({"item": 1, "step": "0", "value": 1}, 400, "not '0'"),
                                ({"item": 1, "step": 0, "value": 5}, 400, "-1, 0 or 1"),
                                ({"item": 1, "step": 0}, 400, "value: missing"),
                                ({"item": 77, "step": 0, "value": 1}, 404, "no item 77")]:
        r = client.post("/api/rate", json=body, headers=auth)
        assert (r.status_code, words in r.json()["error"]) == (status, True), (body, r.text)
    assert client.post("/api/rate", content=b"{", headers=auth).status_code == 400


def test_a_session_needs_the_csrf_token(app_store):
    _, token = app_store.add_user("ann")
    client = TestClient(create_app(app_store))
    page = login(client, token)
    body = {"item": 1, "step": 0, "value": 1}
    assert client.post("/api/rate", json=body).status_code == 403
    assert client.post("/api/rate", json=body, headers={"X-CSRF-Token": "forged"}).status_code == 403
    assert client.post("/api/rate", json=body, headers={"X-CSRF-Token": page_csrf(page.text)}).status_code == 200
    # a form without the token: refused, and the trace stays unfinished
    assert client.post("/label/1/finish", data={"note": "x"}).status_code == 403
    assert all(a.done is None for a in app_store.assignments())
    # the log-in form's own token (double-submit cookie)
    fresh = TestClient(create_app(app_store))
    assert fresh.post("/login", data={"csrf": "made-up", "token": token}).status_code == 403


def test_step_text_with_html_is_escaped_and_no_inline_script_runs(app_store):
    _, token = app_store.add_user("ann")
    client = TestClient(create_app(app_store, AppConfig(show_answer=True)))
    login(client, token)
    page = client.get("/label/5")
    assert "<script>window.pwned" not in page.text and "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page.text
    assert "&lt;b&gt;bold?&lt;/b&gt;" in page.text and "&lt;i&gt;42&lt;/i&gt;" in page.text and "a &amp; b" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.text.count("<script") == 1 and '<script src="/static/annotate.js">' in page.text


def test_the_answer_is_hidden_unless_asked(app_store):
    _, token = app_store.add_user("ann")
    hidden = TestClient(create_app(app_store))
    login(hidden, token)
    assert "Reference answer" not in hidden.get("/label/1").text
    shown = TestClient(create_app(app_store, AppConfig(show_answer=True)))
    login(shown, token)
    assert 'Reference answer: <strong id="answer">7</strong>' in shown.get("/label/1").text


def test_finishing_needs_every_step_or_the_first_wrong_one(app_store):
    _, token = app_store.add_user("ann")
    client = TestClient(create_app(app_store))
    page = login(client, token)
    csrf = page_csrf(page.text)
    assert str(page.url).endswith("/label/1")
    r = client.post("/label/1/finish", data={"csrf": csrf, "trace_seconds": "9"}, follow_redirects=False)
    assert r.status_code == 400 and "Step 1 has no rating" in r.text
    client.post("/api/rate", json={"item": 1, "step": 0, "value": -1}, headers={"X-CSRF-Token": csrf})
    r = client.post("/label/1/finish", data={"csrf": csrf, "trace_seconds": "9", "note": "n"}, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/next")  # stopped at the first wrong step
    # a flagged problem needs no rating
    r = client.post("/label/2/finish", data={"csrf": csrf, "flag": "bad_problem"}, follow_redirects=False)
    assert r.status_code == 303
    assert [(a.item_id, a.flag, a.note, a.seconds) for a in app_store.assignments()] == [
        (1, None, "n", 9.0), (2, "bad_problem", None, 0.0)]
    assert client.get("/next", follow_redirects=False).headers["location"] == "/label/3"


def test_the_admin_page_is_for_admins(app_store):
    _, ann = app_store.add_user("ann")
    _, boss = app_store.add_user("boss", admin=True)
    client = TestClient(create_app(app_store))
    login(client, ann)
    assert client.get("/admin").status_code == 403
    assert client.get("/api/summary", headers={"Authorization": f"Bearer {ann}"}).status_code == 403
    client.post("/api/rate", json={"item": 1, "step": 0, "value": 1, "seconds": 30},
                headers={"Authorization": f"Bearer {ann}"})
    admin = TestClient(create_app(app_store))
    login(admin, boss)
    page = admin.get("/admin")
    assert page.status_code == 200 and "30.0 s per step label, 120 labels per hour" in page.text
    summary = admin.get("/api/summary", headers={"Authorization": f"Bearer {boss}"}).json()
    assert (summary["labels"], summary["labels_per_hour"]) == (1, 120.0)


def test_a_remote_address_needs_allow_remote():
    check_bind("127.0.0.1", False)
    check_bind("0.0.0.0", True)
    with pytest.raises(PrmkitError, match="--allow-remote"):
        check_bind("0.0.0.0", False)


def test_serve_stores_the_traces_and_queues_them_once(tmp_path):
    from annotate_traces import write_scored

    from prmkit.annotate import make_app, queue_file

    db = tmp_path / "labels.sqlite"
    scored = write_scored(tmp_path)
    make_app(scored, db)
    store = Store(db)
    assert [store.item(i).trace.id for i, _ in store.queue()] == ["a1", "a2", "b1", "b2"]  # file order
    queue_file(scored, db, strategy="uncertainty")
    make_app(scored, db)  # a queue exists: serving again leaves its order alone
    assert [store.item(i).trace.id for i, _ in store.queue()] == ["a2", "b2", "a1", "b1"]
    assert [r["strategy"] for r in store.queue_runs()] == ["file order", "uncertainty"]
