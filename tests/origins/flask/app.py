"""A Flask/Werkzeug origin for tests/origins: the protected actions of
tollgate's shipped config and examples, written as a Flask app would write
them. Every protected handler that runs says so in `X-Handler` (the action)
and `X-Identity` (whom it ran for, as this app identifies them); `X-Read`
shows the raw value it read. Usage: python app.py PORT
"""
import json
import logging
import re
import sys
import unicodedata
from urllib.parse import quote

from flask import Flask, request
from werkzeug.serving import run_simple

app = Flask(__name__)

# The account table's collation, as MySQL 8's default utf8mb4_0900_ai_ci
# compares: accents, case and default-ignorable characters do not tell two
# emails apart; compatibility forms fold (NFKD). The same fold in every origin.
IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8]"
)


def account(email):
    decomposed = unicodedata.normalize("NFKD", email)
    stripped = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    return IGNORABLE.sub("", stripped).lower().strip()


def ran(body, action, identity, read, status=200):
    return body, status, {
        "X-Handler": action,
        "X-Identity": quote(str(identity), safe=""),
        "X-Read": quote(json.dumps(read), safe=""),
    }


class HTTPMethodOverrideMiddleware:
    """Flask's documented pattern for method overrides (the "HTTP Method
    Overrides" snippet): the X-HTTP-Method-Override header names the method."""

    allowed_methods = frozenset(["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"])
    bodyless_methods = frozenset(["GET", "HEAD", "OPTIONS", "DELETE"])

    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ, start_response):
        method = environ.get("HTTP_X_HTTP_METHOD_OVERRIDE", "").upper()
        if method in self.allowed_methods:
            environ["REQUEST_METHOD"] = method
        if method in self.bodyless_methods:
            environ["CONTENT_LENGTH"] = "0"
        return self.wsgi_app(environ, start_response)


app.wsgi_app = HTTPMethodOverrideMiddleware(app.wsgi_app)


@app.route("/__health")
def health():
    return "ok"


@app.route("/api/example")
def example():
    mode = request.args.get("mode")
    if mode == "heavy":
        return ran("heavy", "heavy", request.headers.get("CF-Connecting-IP"), mode)
    return "normal"


@app.route("/api/schools/<int:school>/ai/<path:rest>", methods=["GET", "POST"])
def tenant(school, rest):
    if school < 1:
        return "no such school", 404
    return ran("ai", "tenant", school, request.path.split("/")[3])


@app.route("/login", methods=["POST"])
def login():
    data = request.get_json(silent=True)
    email = data.get("email") if isinstance(data, dict) else request.form.get("email")
    if not isinstance(email, str) or not email.strip():
        return "email required", 400
    return ran("wrong password", "login", account(email), email, status=401)


@app.route("/posts/<int:post>", methods=["DELETE"])
def delete_post(post):
    return ran("deleted", "delete", request.headers.get("CF-Connecting-IP"), request.method)


@app.route("/api/v1/data")
def data():
    key = request.headers.get("X-Api-Key") or ""
    if not re.fullmatch(r"key-\d+", key):
        return "bad key", 401
    return ran("data", "apikey", key, key)


@app.route("/account/export")
def export():
    session = request.cookies.get("laravel_session") or ""
    if not re.fullmatch(r"sess-\d+", session):
        return "no session", 401
    return ran("export", "session", session, session)


if __name__ == "__main__":
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True)
