"""Stand-ins for the identity providers Parley asks: a JWKS server with keys generated here
(Apple, Google, any OpenID Connect provider), a token signer, and a fake Facebook Graph API.

Run `python identity_standins.py` (from .venv): it serves on 127.0.0.1 on a free port and prints
`PORT <n>` on its first line. Tests drive it over HTTP:

  GET  /jwks/<provider>          the provider's published keys (Cache-Control: max-age=<ttl>)
  POST /control/keys             {"provider", "kids": [...], "alg": "RS256"|"ES256", "ttl": s,
                                  "publish": [...kids] (default all), "status": 200}
                                 makes keys (kept across calls by kid) and sets what is published
  POST /control/sign             {"provider", "kid", "alg", "claims": {...}, "header": {...}}
                                 -> {"token"}; "forge": "none" | "unsigned" | "hs256-public-key"
                                 | "tamper" builds the broken tokens a verifier must refuse
  GET  /control/stats            {"fetches": {"<provider>": n}}
  POST /control/facebook         {"token", "user_id", "app_id", "valid": true} registers a token
  GET  /graph/me, /graph/app, /graph/debug_token   the Graph API answers for registered tokens
"""

import base64
import hashlib
import hmac
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


class Provider:
    def __init__(self):
        self.keys = {}  # kid -> (alg, private key)
        self.published = []
        self.ttl = 3600
        self.status = 200
        self.fetches = 0

    def jwk(self, kid):
        alg, key = self.keys[kid]
        public = key.public_key()
        if alg.startswith("RS"):
            numbers = public.public_numbers()
            return {"kty": "RSA", "kid": kid, "use": "sig", "alg": alg, "n": b64url(int_bytes(numbers.n)), "e": b64url(int_bytes(numbers.e))}
        numbers = public.public_numbers()
        size = 32 if alg == "ES256" else 48
        return {"kty": "EC", "kid": kid, "use": "sig", "alg": alg, "crv": "P-256" if alg == "ES256" else "P-384",
                "x": b64url(numbers.x.to_bytes(size, "big")), "y": b64url(numbers.y.to_bytes(size, "big"))}


providers = {}
facebook_tokens = {}
lock = threading.Lock()


def provider(name) -> Provider:
    if name not in providers:
        providers[name] = Provider()
    return providers[name]


def make_key(alg):
    if alg.startswith("RS"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1() if alg == "ES256" else ec.SECP384R1())


def sign(request):
    p = provider(request["provider"])
    kid = request.get("kid")
    claims = request.get("claims", {})
    header = dict(request.get("header", {}))
    forge = request.get("forge")
    if forge in ("none", "unsigned"):
        head = {"alg": "none", "typ": "JWT"} if forge == "none" else {"alg": "RS256", "kid": kid, "typ": "JWT"}
        head.update(header)
        return f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}."
    alg, key = p.keys[kid]
    if forge == "hs256-public-key":
        pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        head = {"alg": "HS256", "kid": kid, "typ": "JWT"}
        signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}"
        return signing_input + "." + b64url(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())
    header.setdefault("kid", kid)
    token = jwt.encode(claims, key, algorithm=request.get("alg", alg), headers=header)
    if forge == "tamper":
        head, payload, signature = token.split(".")
        changed = dict(claims)
        changed["sub"] = str(changed.get("sub", "")) + "x"
        token = f"{head}.{b64url(json.dumps(changed).encode())}.{signature}"
    return token


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        with lock:
            if parts[0] == "jwks" and len(parts) == 2:
                p = provider(parts[1])
                p.fetches += 1
                if p.status != 200:
                    return self.answer(p.status, {"error": "unavailable"})
                keys = [p.jwk(kid) for kid in p.published if kid in p.keys]
                return self.answer(200, {"keys": keys}, {"Cache-Control": f"public, max-age={p.ttl}, must-revalidate"})
            if parts == ["control", "stats"]:
                return self.answer(200, {"fetches": {name: p.fetches for name, p in providers.items()}})
            if parts[0] == "graph" and len(parts) == 2:
                return self.graph(parts[1], query)
        self.answer(404, {"error": "not found"})

    def graph(self, endpoint, query):
        invalid = {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190}}
        if endpoint == "me":
            entry = facebook_tokens.get(query.get("access_token"))
            if query.get("fields") != "id" or not entry or not entry["valid"]:
                return self.answer(400, invalid)
            return self.answer(200, {"id": entry["user_id"]})
        if endpoint == "app":
            entry = facebook_tokens.get(query.get("access_token"))
            if not entry or not entry["valid"]:
                return self.answer(400, invalid)
            return self.answer(200, {"id": entry["app_id"], "name": "Test app"})
        if endpoint == "debug_token":
            app_token = query.get("access_token", "")
            if "|" not in app_token or app_token.split("|", 1)[1] != "fb-secret":
                return self.answer(400, invalid)
            entry = facebook_tokens.get(query.get("input_token"))
            if not entry:
                return self.answer(200, {"data": {"is_valid": False, "error": {"code": 190, "message": "Invalid token"}}})
            return self.answer(200, {"data": {"app_id": entry["app_id"], "type": "USER", "is_valid": entry["valid"],
                                              "user_id": entry["user_id"], "expires_at": 2000000000}})
        self.answer(404, {"error": "unknown endpoint"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        with lock:
            if self.path == "/control/keys":
                p = provider(request["provider"])
                alg = request.get("alg", "RS256")
                for kid in request.get("kids", []):
                    if kid not in p.keys:
                        p.keys[kid] = (alg, make_key(alg))
                p.published = request.get("publish", list(p.keys))
                p.ttl = request.get("ttl", p.ttl)
                p.status = request.get("status", 200)
                return self.answer(200, {"published": p.published})
            if self.path == "/control/sign":
                return self.answer(200, {"token": sign(request)})
            if self.path == "/control/facebook":
                facebook_tokens[request["token"]] = {"user_id": request["user_id"], "app_id": request.get("app_id", "fb-app"),
                                                     "valid": request.get("valid", True)}
                return self.answer(200, {})
        self.answer(404, {"error": "not found"})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    # Exit when the test that started us closes our stdin (or dies).
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
