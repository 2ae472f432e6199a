"""The workbench's sign-in form as a browser fills it: the login page first (its token, in a
`SameSite=Strict` cookie and in the form), then the form with that token (issue 63, defect 2)."""

from __future__ import annotations

import http.client
import re
import urllib.parse

TOKEN = "signin_token"  # the cookie's and the field's name


def form_token(page: str) -> str:
    """The token the login page wrote into its form."""
    found = re.search(r'name="signin_token" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def post_sign_in(port: int, user: str, password: str, source: str = "127.0.0.1",
                 timeout: float = 60) -> http.client.HTTPResponse:
    """GET /login, then POST its form with the token (cookie and field) from `source`: the
    answer to the POST, its body read into `.text`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    connection.request("GET", "/login")
    page = connection.getresponse()
    token = form_token(page.read().decode("utf-8", "replace"))
    body = urllib.parse.urlencode({"username": user, "password": password, TOKEN: token})
    connection.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded",
                                                "Cookie": f"{TOKEN}={token}",
                                                "Origin": f"http://127.0.0.1:{port}"})
    response = connection.getresponse()
    response.text = response.read().decode("utf-8", "replace")  # type: ignore[attr-defined]
    connection.close()
    return response
