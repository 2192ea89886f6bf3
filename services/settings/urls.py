"""Credentials in URLs: put a secret file's password into its URL, and hide every credential of a URL in what is
saved or printed (settings.json, the runs table, W&B, `azr config show`)."""

from __future__ import annotations

from urllib.parse import quote, unquote_plus

SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "pass", "secret", "token", "access_token", "api_key",
                               "apikey", "key", "auth", "sslpassword", "sslkey"})
"""Query parameters whose values mask_url_password hides (`?password=...`, as libpq and others accept)."""


def mask_url_password(url: str) -> str:
    """The URL with its secrets replaced by `***`: the password of `scheme://user:secret@host` and the value of every
    query parameter named in SECRET_QUERY_KEYS. Read by parsing: the credentials end at the last `@` before the
    query, so a password holding `@`, `/` or `:` is hidden whole; the user name is kept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, mark, query = rest.partition("?")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        rest = f"{user}:***@{host}" if colon else f"{credentials}@{host}"
    if mark:
        query, hash_mark, fragment = query.partition("#")
        pairs = []
        for pair in query.split("&"):
            name, equals, _ = pair.partition("=")
            pairs.append(f"{name}=***" if equals and unquote_plus(name).lower() in SECRET_QUERY_KEYS else pair)
        query = "&".join(pairs) + hash_mark + fragment
    return f"{scheme}://{rest}{mark}{query}"


def url_with_password(url: str, password: str) -> str:
    """`url` with `password` (URL-quoted) in its credentials: `scheme://user@host` -> `scheme://user:pw@host`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    credentials, at, host = authority.rpartition("@")
    user = credentials.partition(":")[0] if at else ""
    return f"{scheme}://{user}:{quote(password, safe='')}@{host}{slash}{path}"
