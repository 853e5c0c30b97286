"""A test OAuth issuer for the console's login through it (test_console_processes.py,
test_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


class AuthorizationServer:
    """An OAuth issuer on 127.0.0.1 that logs `subject` in at once: RFC 8414 metadata, a JWKS,
    /authorize (straight back to the redirect URI with a code) and /token (the code for a JWT,
    only with the PKCE verifier of its challenge). `host` names it in its URL: "localhost" makes
    it another site than a console on 127.0.0.1, as a real issuer is."""

    def __init__(self, subject: str = "carol", host: str = "127.0.0.1") -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        jwks = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]})
        codes: dict[str, dict[str, str]] = {}
        self.authorized: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: str, kind: str = "application/json",
                      location: str | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                if location:
                    self.send_header("Location", location)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/.well-known/oauth-authorization-server":
                    base = owner.url
                    self._send(200, json.dumps({
                        "issuer": base, "jwks_uri": f"{base}/jwks.json",
                        "authorization_endpoint": f"{base}/authorize",
                        "token_endpoint": f"{base}/token"}))
                elif url.path == "/jwks.json":
                    self._send(200, jwks)
                elif url.path == "/authorize":
                    asked = {k: v[0] for k, v in parse_qs(url.query).items()}
                    owner.authorized.append(asked)
                    code = f"code-{len(codes)}"
                    codes[code] = asked
                    back = asked["redirect_uri"] + "?" + urlencode(
                        {"code": code, "state": asked["state"]})
                    self._send(302, "", "text/plain", back)
                else:
                    self._send(404, "{}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                asked = codes.pop(form.get("code", ""), None)  # a code works once
                challenge = base64.urlsafe_b64encode(hashlib.sha256(
                    form.get("code_verifier", "").encode()).digest()).rstrip(b"=").decode()
                if (asked is None or challenge != asked["code_challenge"]
                        or form.get("redirect_uri") != asked["redirect_uri"]
                        or form.get("client_id") != asked["client_id"]):
                    self._send(400, json.dumps({"error": "invalid_grant"}))
                    return
                now = int(time.time())
                token = jwt.encode({"iss": owner.url, "aud": asked["resource"], "sub": subject,
                                    "scope": "mcp", "iat": now, "exp": now + 300}, key,
                                   algorithm="RS256", headers={"kid": "k1"})
                self._send(200, json.dumps({"access_token": token, "token_type": "Bearer"}))

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
