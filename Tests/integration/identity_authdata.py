#!/usr/bin/env python3
"""authData over REST against the provider stand-ins (identity_standins.py: JWKS with keys made
here, a fake Graph API): signup and login per provider (anonymous, apple, google, facebook, an
OpenID Connect provider), every kind of bad token refused, key rotation, linking and unlinking,
the last login method kept, authData hidden from other users, concurrent signups with one id
making one user, and malformed input answered in Parse's format."""
import os
import sys
import threading
import time
import urllib.parse
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from identity_support import (APPLE_CLIENT, APPLE_ISSUER, GOOGLE_CLIENT, GOOGLE_ISSUER, OIDC_CLIENT, OIDC_ISSUER,  # noqa: E402
                              IdentityStandIn, Parse, claims)
from realtime_support import ParleyServer, TempPostgres, check, log  # noqa: E402

MASTER = "master-of-auth"


def expect(result, status, code=None, what=""):
    got_status, body, _ = result
    check(got_status == status, f"{what}: status {got_status} != {status}: {body}")
    if code is not None:
        check(isinstance(body, dict) and body.get("code") == code, f"{what}: code {body} != {code}")
    return body


def main():
    postgres = TempPostgres()
    standin = IdentityStandIn()
    server = None
    try:
        database = "identity_authdata"
        url = postgres.create_database(database)
        for provider in ("apple", "google", "keycloak"):
            standin.keys(provider, ["k1", "rogue"], publish=["k1"], ttl=3600)
        server = ParleyServer(url, extra=["--master-key", MASTER] + standin.server_options()).start()
        api = Parse(server.http_url, master_key=MASTER)

        def users():
            return int(postgres.psql(database, "SELECT count(*) FROM users").strip())

        def session_created_with(token):
            body = expect(api.call("GET", "/sessions/me", token=token), 200, what="sessions/me")
            return body["createdWith"]

        # Anonymous: a new user (201, Location, generated username, session), then the same user (200).
        anon = {"anonymous": {"id": str(uuid.uuid4())}}
        status, body, headers = api.call("POST", "/users", {"authData": anon})
        check(status == 201, f"anonymous signup 201: {status} {body}")
        anon_id = body["objectId"]
        check(headers.get("Location", "").endswith(f"/parse/users/{anon_id}"), f"Location header: {headers.get('Location')}")
        check(len(body.get("username", "")) == 25 and body["username"].isalnum(), f"generated username: {body}")
        check(body["sessionToken"].startswith("r:"), "signup session")
        check(session_created_with(body["sessionToken"]) == {"action": "signup", "authProvider": "anonymous"}, "createdWith signup")
        status, again, headers = api.call("POST", "/users", {"authData": anon})
        check(status == 200 and again["objectId"] == anon_id, f"anonymous login 200 same user: {status} {again}")
        check(headers.get("Location", "").endswith(f"/parse/users/{anon_id}"), "login Location header")
        check(again["authData"] == anon and again["username"] == body["username"], f"login answers the user itself: {again}")
        check(again["sessionToken"] != body["sessionToken"], "a new session")
        check(session_created_with(again["sessionToken"]) == {"action": "login", "authProvider": "anonymous"}, "createdWith login")
        log("anonymous signup 201 and login 200 with createdWith: ok")

        # The anonymous user signs up with a username: same objectId, its data kept, anonymous gone.
        token = again["sessionToken"]
        expect(api.call("PUT", f"/users/{anon_id}", {"score": 7}, token=token), 200, what="anonymous user saves data")
        expect(api.call("PUT", f"/users/{anon_id}", {"authData": {"anonymous": None}}, token=token), 400, 142,
               "unlinking the only login of a user without a password")
        expect(api.call("PUT", f"/users/{anon_id}", {"username": "anna", "password": "anna-pw", "authData": {"anonymous": None}},
                        token=token), 200, what="anonymous upgrade")
        logged = expect(api.call("POST", "/login", {"username": "anna", "password": "anna-pw"}), 200, what="login after upgrade")
        check(logged["objectId"] == anon_id and logged.get("score") == 7 and "authData" not in logged, f"upgraded user kept data: {logged}")
        status, fresh, _ = api.call("POST", "/users", {"authData": anon})
        check(status == 201 and fresh["objectId"] != anon_id, f"the old anonymous id is free again: {status} {fresh}")
        log("anonymous user upgraded with username and password keeps its data: ok")

        # Apple, Google, an OIDC provider: new user, then the same user; createdWith names the provider.
        tokens = {}
        for provider, issuer, audience, field in (("apple", APPLE_ISSUER, APPLE_CLIENT, "token"),
                                                  ("google", GOOGLE_ISSUER, GOOGLE_CLIENT, "id_token"),
                                                  ("keycloak", OIDC_ISSUER, OIDC_CLIENT, "id_token")):
            sub = f"{provider}-user-1"
            jwt = standin.sign(provider, "k1", claims(issuer, audience, sub))
            data = {provider: {"id": sub, field: jwt}}
            created = expect(api.call("POST", "/users", {"authData": data}), 201, what=f"{provider} signup")
            check(session_created_with(created["sessionToken"])["authProvider"] == provider, f"{provider} createdWith")
            jwt2 = standin.sign(provider, "k1", claims(issuer, audience, sub))
            again = expect(api.call("POST", "/users", {"authData": {provider: {"id": sub, field: jwt2}}}), 200, what=f"{provider} login")
            check(again["objectId"] == created["objectId"], f"{provider}: same user")
            check(again["authData"][provider][field] == jwt2, f"{provider}: the stored token is the latest")
            tokens[provider] = (created["objectId"], again["sessionToken"], issuer, audience, field)
        log("apple, google and OIDC signup 201 / login 200: ok")

        # Facebook through the fake Graph API (debug_token with the app secret).
        standin.facebook("fb-token-1", "fb-user-1")
        fb = {"facebook": {"id": "fb-user-1", "access_token": "fb-token-1"}}
        fb_user = expect(api.call("POST", "/users", {"authData": fb}), 201, what="facebook signup")
        check(expect(api.call("POST", "/users", {"authData": fb}), 200, what="facebook login")["objectId"] == fb_user["objectId"], "facebook same user")
        expect(api.call("POST", "/users", {"authData": {"facebook": {"id": "fb-user-2", "access_token": "fb-token-1"}}}), 404, 101,
               "facebook token of another id")
        standin.facebook("fb-token-other-app", "fb-user-3", app_id="other-app")
        expect(api.call("POST", "/users", {"authData": {"facebook": {"id": "fb-user-3", "access_token": "fb-token-other-app"}}}), 404, 101,
               "facebook token of another app")
        log("facebook signup and login, foreign tokens refused: ok")

        # Every bad token refused with 101, and no user made.
        before = users()
        sub = "apple-bad"
        good = claims(APPLE_ISSUER, APPLE_CLIENT, sub)
        bad = {
            "wrong aud": standin.sign("apple", "k1", claims(APPLE_ISSUER, "someone.else", sub)),
            "wrong iss": standin.sign("apple", "k1", claims("https://evil.example", APPLE_CLIENT, sub)),
            "expired": standin.sign("apple", "k1", claims(APPLE_ISSUER, APPLE_CLIENT, sub, lifetime=-600)),
            "unsigned": standin.sign("apple", "k1", good, forge="unsigned"),
            "alg none": standin.sign("apple", "k1", good, forge="none"),
            "unknown key": standin.sign("apple", "rogue", good),
            "tampered": standin.sign("apple", "k1", good, forge="tamper"),
            "hs256 with the public key": standin.sign("apple", "k1", good, forge="hs256-public-key"),
            "another user's token": standin.sign("apple", "k1", claims(APPLE_ISSUER, APPLE_CLIENT, "apple-user-1")),
        }
        for what, jwt in bad.items():
            expect(api.call("POST", "/users", {"authData": {"apple": {"id": sub, "token": jwt}}}), 404, 101, what)
        expect(api.call("POST", "/users", {"authData": {"apple": {"id": sub}}}), 404, 101, "no token")
        expect(api.call("POST", "/users", {"authData": {"apple": {"id": "apple-user-1"}}}), 404, 101,
               "an existing user's id without a token")
        check(users() == before, "no user was made by a refused token")
        log("wrong aud/iss, expired, unsigned, alg none, unknown key, tampered, HS256, foreign token: all 101: ok")

        # Key rotation: a token signed by a newly published key is accepted (refetch on unknown kid).
        standin.keys("apple", ["k2"], publish=["k2"])
        time.sleep(1.2)  # the refused unknown-key token above spent this second's refetch (--auth-jwks-refetch-interval 1s)
        rotated = standin.sign("apple", "k2", claims(APPLE_ISSUER, APPLE_CLIENT, "apple-user-1"))
        status, body, _ = api.call("POST", "/users", {"authData": {"apple": {"id": "apple-user-1", "token": rotated}}})
        check(status == 200 and body["objectId"] == tokens["apple"][0], f"rotated key accepted: {status} {body}")
        log("key rotation picked up: ok")

        # Unknown or disabled providers: 252.
        expect(api.call("POST", "/users", {"authData": {"myspace": {"id": "1", "token": "x"}}}), 400, 252, "unknown provider")
        expect(api.call("POST", "/users", {"authData": {"github": {"id": "1", "access_token": "x"}}}), 400, 252, "provider not enabled")
        expect(api.call("POST", "/users", {"authData": None}), 400, 252, "authData null")
        expect(api.call("POST", "/users", {"authData": "anonymous"}), 400, 252, "authData a string")
        expect(api.call("POST", "/users", {"authData": {"anonymous": "x"}}), 400, 252, "provider entry a string")
        expect(api.call("POST", "/users", {"authData": {"bad name!": {"id": "1"}}}), 400, 252, "provider name with odd characters")
        expect(api.call("POST", "/users", {"authData": {f"p{i}": {"id": "1"} for i in range(17)}}), 400, 252, "too many providers")
        expect(api.call("POST", "/users", {"authData": {"anonymous": {"id": 5}}}), 404, 101, "id not a string")
        expect(api.call("POST", "/users", {"authData": {"anonymous": {"id": "x" * 300}}}), 404, 101, "id too long")
        expect(api.call("POST", "/users", {"authData": {}}), 400, 200, "empty authData is a plain signup")
        log("unknown/disabled provider 252, malformed authData refused: ok")

        # Linking and unlinking on PUT /users/:id.
        bob = expect(api.call("POST", "/users", {"username": "bob", "password": "bob-pw"}), 201, what="bob signs up")
        bob_id, bob_token = bob["objectId"], bob["sessionToken"]
        gjwt = standin.sign("google", "k1", claims(GOOGLE_ISSUER, GOOGLE_CLIENT, "google-bob"))
        link = {"google": {"id": "google-bob", "id_token": gjwt}}
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": {"google": {"id": "google-bob", "id_token": "garbage"}}}, token=bob_token),
               404, 101, "linking with a bad token")
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": link}, token=bob_token), 200, what="bob links google")
        me = expect(api.call("GET", "/users/me", token=bob_token), 200, what="bob me")
        check(me["authData"]["google"]["id"] == "google-bob", f"me shows the linked provider: {me}")
        via_google = expect(api.call("POST", "/users", {"authData": link}), 200, what="login with the linked provider")
        check(via_google["objectId"] == bob_id, "google logs in as bob")
        # With bob's session, another user's provider id cannot be taken (208), nor logged into.
        apple_user, apple_token = tokens["apple"][0], tokens["apple"][1]
        ajwt = standin.sign("apple", "k2", claims(APPLE_ISSUER, APPLE_CLIENT, "apple-user-1"))
        apple_data = {"apple": {"id": "apple-user-1", "token": ajwt}}
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": apple_data}, token=bob_token), 400, 208, "linking another user's id")
        expect(api.call("POST", "/users", {"authData": apple_data}, token=bob_token), 400, 208, "authData login of another user with a session")
        # Another user may not change bob's authData; nor may nobody.
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": {"google": None}}, token=apple_token), 400, 206, "another user unlinks")
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": {"google": None}}), 400, 206, "no session unlinks")
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": None}, token=bob_token), 400, 252, "authData null on update")
        # Unlink (bob keeps his password): google then makes a new user.
        expect(api.call("PUT", f"/users/{bob_id}", {"authData": {"google": None}}, token=bob_token), 200, what="bob unlinks google")
        me = expect(api.call("GET", "/users/me", token=bob_token), 200, what="bob me after unlink")
        check("authData" not in me, f"no authData after unlinking: {me}")
        gjwt2 = standin.sign("google", "k1", claims(GOOGLE_ISSUER, GOOGLE_CLIENT, "google-bob"))
        newcomer = expect(api.call("POST", "/users", {"authData": {"google": {"id": "google-bob", "id_token": gjwt2}}}), 201,
                          what="unlinked id signs up anew")
        check(newcomer["objectId"] != bob_id, "a new user")
        # The apple-only user may not unlink apple; the master key may.
        expect(api.call("PUT", f"/users/{apple_user}", {"authData": {"apple": None}}, token=apple_token), 400, 142, "last provider")
        relog = standin.sign("apple", "k2", claims(APPLE_ISSUER, APPLE_CLIENT, "apple-user-1"))
        check(expect(api.call("POST", "/users", {"authData": {"apple": {"id": "apple-user-1", "token": relog}}}), 200,
                     what="apple still logs in")["objectId"] == apple_user, "apple user intact")
        log("link, login through the link, 208 for another user's id, unlink, last provider kept (142): ok")

        # authData is never shown to other users (get, find), only to the user and the master key.
        seen = expect(api.call("GET", f"/users/{apple_user}", token=bob_token), 200, what="bob reads the apple user")
        check("authData" not in seen, f"another user's authData hidden: {seen}")
        found = expect(api.call("GET", "/users", token=bob_token), 200, what="bob lists users")
        check(all("authData" not in user for user in found["results"]), "find hides authData")
        check("authData" not in expect(api.call("GET", f"/users/{apple_user}"), 200, what="anonymous read"), "no session: hidden")
        own = expect(api.call("GET", f"/users/{apple_user}", token=apple_token), 200, what="own read")
        check(own["authData"]["apple"]["id"] == "apple-user-1", f"own authData shown: {own}")
        master = expect(api.call("GET", f"/users/{apple_user}", master=True), 200, what="master read")
        check("apple" in master["authData"], "master sees authData")
        where = urllib.parse.quote('{"authData.apple.id":"apple-user-1"}')
        expect(api.call("GET", f"/users?where={where}", token=bob_token), 400, 102, "authData not queryable")
        log("authData hidden from other users, shown to the user and the master key: ok")

        # Concurrent signups with one id: one user, every answer names it.
        shared = {"anonymous": {"id": str(uuid.uuid4())}}
        answers = []
        lock = threading.Lock()

        def attempt():
            status, body, _ = api.call("POST", "/users", {"authData": shared})
            with lock:
                answers.append((status, body.get("objectId")))

        threads = [threading.Thread(target=attempt) for _ in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(status for status, _ in answers)
        ids = {object_id for _, object_id in answers}
        check(statuses.count(201) == 1 and statuses.count(200) == 11, f"one signup, eleven logins: {statuses}")
        check(len(ids) == 1, f"every answer names the same user: {ids}")
        held = postgres.psql(database, f"SELECT count(*) FROM users WHERE auth_data->'anonymous'->>'id' = '{shared['anonymous']['id']}'").strip()
        check(held == "1", f"one row holds the id: {held}")
        log("12 concurrent signups with one id: one user (1 x 201, 11 x 200): ok")
        server.stop()
        log("identity_authdata: ok")
    except BaseException:
        if server:
            log(server.log())
        raise
    finally:
        if server:
            server.stop()
        standin.close()
        postgres.stop()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
