"""Shared pieces of the identity integration tests: the provider stand-in (identity_standins.py
in a child process), a Parse REST client that keeps headers, and the options that point a
`parley serve` at the stand-ins."""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
APPLE_CLIENT = "com.example.parley"
GOOGLE_CLIENT = "google-client.apps.example"
OIDC_CLIENT = "kc-client"
OIDC_ISSUER = "http://issuer.example/realms/parley"
FACEBOOK_APP = "fb-app"
FACEBOOK_SECRET = "fb-secret"
APPLE_ISSUER = "https://appleid.apple.com"
GOOGLE_ISSUER = "https://accounts.google.com"


class IdentityStandIn:
    """identity_standins.py on a free port, stopped by closing its stdin."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "identity_standins.py")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"identity stand-in did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def control(self, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def keys(self, provider, kids, **extra):
        return self.control("/control/keys", dict(provider=provider, kids=kids, **extra))

    def sign(self, provider, kid, claims, **extra):
        return self.control("/control/sign", dict(provider=provider, kid=kid, claims=claims, **extra))["token"]

    def facebook(self, token, user_id, app_id=FACEBOOK_APP, valid=True):
        self.control("/control/facebook", {"token": token, "user_id": user_id, "app_id": app_id, "valid": valid})

    def fetches(self, provider):
        return self.control("/control/stats")["fetches"].get(provider, 0)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def server_options(self):
        return [
            "--auth-apple-client-ids", APPLE_CLIENT, "--auth-apple-jwks-url", self.url + "/jwks/apple",
            "--auth-google-client-ids", GOOGLE_CLIENT, "--auth-google-jwks-url", self.url + "/jwks/google",
            "--auth-facebook-app-ids", FACEBOOK_APP, "--auth-facebook-app-secret", FACEBOOK_SECRET,
            "--auth-facebook-graph-url", self.url + "/graph",
            "--auth-oidc-providers", f"keycloak|{OIDC_ISSUER}|{self.url}/jwks/keycloak|{OIDC_CLIENT}",
            "--auth-jwks-refetch-interval", "1s",
        ]


def claims(issuer, audience, subject, lifetime=600, **extra):
    now = int(time.time())
    body = {"iss": issuer, "aud": audience, "sub": subject, "iat": now, "exp": now + lifetime}
    body.update(extra)
    return body


class Parse:
    """Parse REST calls on one server: (status, JSON body, headers)."""

    def __init__(self, base_url, app_id="parley", master_key=None):
        self.base = base_url + "/parse"
        self.app_id = app_id
        self.master_key = master_key

    def call(self, method, path, body=None, token=None, master=False, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"X-Parse-Application-Id": self.app_id, "Content-Type": "application/json"}
        if token:
            headers["X-Parse-Session-Token"] = token
        if master:
            headers["X-Parse-Master-Key"] = self.master_key
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null"), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null"), dict(error.headers)
