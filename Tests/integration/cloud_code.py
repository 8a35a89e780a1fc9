#!/usr/bin/env python3
"""Cloud Code through webhooks end to end: two `parley serve` nodes on one PostgreSQL and a
webhook service written here (cloud_support.WebhookService).

Checks: the Hooks API as Parse Server (create, duplicate 143, list, get, update, missing 143,
invalid declarations 143, delete by PUT {"__op":"Delete"} and DELETE), master key only; a hook
registered on node A is used by node B; `POST /functions/:name` sends Parse's request body
(params, master, user, installationId, headers, ip, functionName, X-Parse-Webhook-Key) and
answers {"result": …}; a webhook error is 141 with its message; unknown function, timeout,
refused connection, non-JSON and oversized (100 MB) answers are 141 with a clear message and
the server keeps serving; a flood against a slow webhook is refused at once past the bounded
queue. Triggers: beforeSave sees object/original field by field, rewrites and rejects (single
requests, batch sub-requests, signup); beforeDelete rejects; afterSave/afterDelete are delivered
with the saved object, and retried while the webhook fails. Jobs: `POST /jobs/:name` (master)
answers X-Parse-Job-Status-Id and `_JobStatus` shows it succeeded. A node SIGKILLed with
after-triggers and a job pending delivers them after restart.
"""
import json
import os
import sys
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_support import APP_ID, MASTER_KEY, WEBHOOK_KEY, Raw, WebhookService, check, log, parse, wait_for  # noqa: E402
from realtime_support import ParleyServer, TempPostgres  # noqa: E402

FLAGS = ["--app-id", APP_ID, "--master-key", MASTER_KEY, "--webhook-key", WEBHOOK_KEY, "--webhook-timeout", "1s",
         "--webhook-job-timeout", "3s", "--webhook-max-answer-bytes", "65536", "--webhook-connections", "2", "--webhook-queue", "8",
         "--webhook-backoff-base", "100ms", "--webhook-backoff-max", "400ms", "--webhook-max-attempts", "50",
         "--webhook-poll-interval", "200ms", "--password-mem-limit", "8192", "--password-ops-limit", "1",
         "--allow-client-class-creation"]  # the hooks create classes as a client, as Parse Server's tests allow


def ok(label, condition, detail=""):
    check(condition, f"{label}: {detail}")
    log(f"ok    {label}")


def hooks_api(a, b, hooks):
    # Master key only.
    for method, path, body in [("GET", "/hooks/functions", None), ("GET", "/hooks/triggers", None),
                               ("POST", "/hooks/functions", {"functionName": "x", "url": hooks.url("/x")}),
                               ("PUT", "/hooks/functions/x", {"url": hooks.url("/y")}), ("DELETE", "/hooks/functions/x", None),
                               ("POST", "/jobs/x", {})]:
        status, answer, _ = parse(a, method, path, body)
        ok(f"{method} {path} without the master key is 403", status == 403 and answer == {"error": "unauthorized: master key is required"},
           f"{status} {answer}")
    status, answer, _ = parse(a, "POST", "/hooks/functions", {"functionName": "echo", "url": hooks.url("/echo")}, master=True)
    ok("create function hook", status == 200 and answer == {"functionName": "echo", "url": hooks.url("/echo")}, f"{status} {answer}")
    status, answer, _ = parse(a, "POST", "/hooks/functions", {"functionName": "echo", "url": hooks.url("/other")}, master=True)
    ok("duplicate function is 143", status == 400 and answer == {"code": 143, "error": "function name: echo already exits"}, answer)
    status, answer, _ = parse(a, "POST", "/hooks/triggers", {"className": "Game", "triggerName": "beforeSave", "url": hooks.url("/bs")}, master=True)
    ok("create trigger hook", status == 200 and answer == {"className": "Game", "triggerName": "beforeSave", "url": hooks.url("/bs")}, answer)
    status, answer, _ = parse(a, "POST", "/hooks/triggers", {"className": "Game", "triggerName": "beforeSave", "url": hooks.url("/x")}, master=True)
    ok("duplicate trigger is 143", answer == {"code": 143, "error": "class Game already has trigger beforeSave"}, answer)
    for body in [{"functionName": "f"}, {"url": hooks.url("/x")}, {"className": "Game", "triggerName": "beforeNothing", "url": hooks.url("/x")},
                 {"className": "Game", "url": hooks.url("/x")}]:
        status, answer, _ = parse(a, "POST", "/hooks/triggers", body, master=True)
        ok(f"invalid declaration {body} is 143", status == 400 and answer == {"code": 143, "error": "invalid hook declaration"}, answer)
    status, answer, _ = parse(a, "POST", "/hooks/functions", {"functionName": "ftp", "url": "ftp://example.com/x"}, master=True)
    ok("a hook URL neither http nor https is refused with 143", answer.get("code") == 143 and "ftp://" in answer.get("error", ""), answer)
    status, answer, _ = parse(b, "GET", "/hooks/functions", master=True)
    ok("list functions (node B)", answer == [{"functionName": "echo", "url": hooks.url("/echo")}], answer)
    status, answer, _ = parse(b, "GET", "/hooks/triggers", master=True)
    ok("list triggers (node B)", answer == [{"className": "Game", "triggerName": "beforeSave", "url": hooks.url("/bs")}], answer)
    status, answer, _ = parse(a, "GET", "/hooks/functions/echo", master=True)
    ok("get function", answer == {"functionName": "echo", "url": hooks.url("/echo")}, answer)
    status, answer, _ = parse(a, "GET", "/hooks/functions/nope", master=True)
    ok("get missing function is 143", answer == {"code": 143, "error": "no function named: nope is defined"}, answer)
    status, answer, _ = parse(a, "GET", "/hooks/triggers/Nope/beforeSave", master=True)
    ok("get missing trigger is 143", answer == {"code": 143, "error": "class Nope does not exist"}, answer)
    status, answer, _ = parse(a, "PUT", "/hooks/functions/nope", {"url": hooks.url("/x")}, master=True)
    ok("update missing function is 143", answer == {"code": 143, "error": "no function named: nope is defined"}, answer)
    status, answer, _ = parse(a, "PUT", "/hooks/triggers/Nope/afterSave", {"url": hooks.url("/x")}, master=True)
    ok("update missing trigger is 143", answer == {"code": 143, "error": "class Nope does not exist"}, answer)
    status, answer, _ = parse(a, "PUT", "/hooks/functions/echo", {}, master=True)
    ok("update without url is 143", answer == {"code": 143, "error": "invalid hook declaration"}, answer)
    # Cross-node: a change through A is what B runs.
    parse(a, "POST", "/hooks/functions", {"functionName": "where", "url": hooks.url("/where-1")}, master=True)
    hooks.on("/where-1", lambda body, _: {"success": 1})
    hooks.on("/where-2", lambda body, _: {"success": 2})
    status, answer, _ = parse(b, "POST", "/functions/where", {})
    ok("node B calls the hook registered on node A", answer == {"result": 1}, answer)
    status, answer, _ = parse(a, "PUT", "/hooks/functions/where", {"url": hooks.url("/where-2")}, master=True)
    ok("update function hook", answer == {"functionName": "where", "url": hooks.url("/where-2")}, answer)
    # Node B hears the change (NOTIFY): waited for, not slept on.
    answer = wait_for("node B follows the update", lambda: (lambda r: r if r == {"result": 2} else None)(parse(b, "POST", "/functions/where", {})[1]))
    ok("node B follows an update made on node A", answer == {"result": 2}, answer)
    status, answer, _ = parse(a, "PUT", "/hooks/functions/where", {"__op": "Delete"}, master=True)
    ok("PUT __op Delete answers {}", status == 200 and answer == {}, answer)
    answer = wait_for("node B forgets the function", lambda: (lambda r: r if r.get("code") == 141 else None)(parse(b, "POST", "/functions/where", {})[1]))
    ok("a deleted function is gone on node B", answer == {"code": 141, "error": 'Invalid function: "where"'}, answer)
    status, answer, _ = parse(a, "DELETE", "/hooks/triggers/Game/beforeSave", master=True)
    ok("DELETE trigger hook", status == 200 and answer == {}, answer)
    status, answer, _ = parse(a, "GET", "/hooks/triggers", master=True)
    ok("no triggers left", answer == [], answer)
    status, answer, _ = parse(a, "GET", "/serverInfo", master=True)
    ok("serverInfo announces hooks and jobs", answer["features"]["hooks"]["create"] is True and answer["features"]["cloudCode"]["jobs"] is True, answer)


def functions(a, hooks, user_id, token):
    def echo(body, record):
        return {"success": {"got": body["params"]}}
    hooks.on("/echo", echo)
    status, answer, _ = parse(a, "POST", "/functions/echo", {"n": 1, "s": "x", "nested": {"a": [1, 2]}}, token=token,
                              headers={"X-Parse-Installation-Id": "inst-1", "X-Custom": "yes"})
    ok("function answers {result}", status == 200 and answer == {"result": {"got": {"n": 1, "s": "x", "nested": {"a": [1, 2]}}}}, answer)
    record = hooks.received("/echo")[-1]
    body = record["body"]
    ok("webhook key header", record["headers"].get("x-parse-webhook-key") == WEBHOOK_KEY, record["headers"])
    ok("content type", record["headers"].get("content-type") == "application/json", record["headers"])
    ok("functionName", body["functionName"] == "echo", body)
    ok("params", body["params"] == {"n": 1, "s": "x", "nested": {"a": [1, 2]}}, body)
    ok("master false", body["master"] is False, body)
    ok("user is the session's user", body["user"]["objectId"] == user_id and body["user"]["username"] == "alice" and "password" not in body["user"], body["user"])
    ok("installationId", body["installationId"] == "inst-1", body)
    ok("headers (lower-case, master key left out)", body["headers"]["x-custom"] == "yes" and body["headers"]["x-parse-application-id"] == APP_ID, body["headers"])
    ok("ip", body["ip"] == "127.0.0.1", body)
    ok("context", body["context"] == {}, body)
    status, answer, _ = parse(a, "POST", "/functions/echo", {}, master=True)
    ok("master call says master true and has no user", hooks.received("/echo")[-1]["body"]["master"] is True
       and "user" not in hooks.received("/echo")[-1]["body"], hooks.received("/echo")[-1]["body"])
    ok("master key is never forwarded", "x-parse-master-key" not in hooks.received("/echo")[-1]["body"]["headers"], "")

    cases = {
        "/fail": (lambda b, r: {"error": "no way"}, {"code": 141, "error": "no way"}),
        "/fail-object": (lambda b, r: {"error": {"code": 142, "message": "bad input"}}, {"code": 141, "error": "bad input"}),
        "/garbage": (lambda b, r: Raw(200, b"<html>oops</html>"), {"code": 141, "error": "Malformed response"}),
        "/status": (lambda b, r: Raw(502, b"bad gateway"), {"code": 141, "error": "Webhook answered HTTP 502."}),
        "/slow": (lambda b, r: Raw(200, b'{"success":1}', delay=3), {"code": 141, "error": "Webhook timed out."}),
        "/huge": (lambda b, r: Raw(200, stream_bytes=100 << 20), None),
        "/null": (lambda b, r: {"success": None}, None),
    }
    for path, (handler, expected) in cases.items():
        hooks.on(path, handler)
        name = path.strip("/").replace("-", "_")
        parse(a, "POST", "/hooks/functions", {"functionName": name, "url": hooks.url(path)}, master=True)
        started = time.time()
        status, answer, _ = parse(a, "POST", f"/functions/{name}", {})
        elapsed = time.time() - started
        if path == "/huge":
            ok("100 MB answer is refused (bounded)", status == 400 and answer["code"] == 141 and "larger than the limit" in answer["error"], answer)
        elif path == "/null":
            ok("success null answers result null", answer == {"result": None}, answer)
        else:
            ok(f"{path} → {expected}", status == 400 and answer == expected, f"{status} {answer}")
        if path == "/slow":
            ok("timeout within the deadline", elapsed < 2.5, f"{elapsed:.2f}s")
    parse(a, "POST", "/hooks/functions", {"functionName": "refused", "url": "http://127.0.0.1:9/x"}, master=True)
    status, answer, _ = parse(a, "POST", "/functions/refused", {})
    ok("refused connection is 141 unreachable", answer["code"] == 141 and answer["error"].startswith("Webhook unreachable"), answer)
    status, answer, _ = parse(a, "POST", "/functions/missing", {})
    ok("unknown function is 141", status == 400 and answer == {"code": 141, "error": 'Invalid function: "missing"'}, answer)
    with urllib.request.urlopen(a.http_url + "/health", timeout=5) as response:
        ok("server still serves after the huge answer", response.status == 200, response.status)

    # Flood: a slow webhook and 120 calls at once; the bounded queue refuses the excess at once.
    hooks.on("/slowish", lambda b, r: Raw(200, b'{"success":"done"}', delay=0.5))
    parse(a, "POST", "/hooks/functions", {"functionName": "slowish", "url": hooks.url("/slowish")}, master=True)
    started = time.time()
    with ThreadPoolExecutor(max_workers=120) as pool:
        answers = list(pool.map(lambda _: parse(a, "POST", "/functions/slowish", {}), range(120)))
    elapsed = time.time() - started
    done = sum(1 for s, ans, _ in answers if ans == {"result": "done"})
    refused = sum(1 for s, ans, _ in answers if ans.get("code") == 141 and "overloaded" in ans.get("error", ""))
    timed_out = sum(1 for s, ans, _ in answers if ans.get("code") == 141 and "timed out" in ans.get("error", ""))
    ok("flood: every call answered (done, refused or timed out), none 5xx", done + refused + timed_out == 120 and all(s < 500 for s, _, _ in answers),
       f"done={done} refused={refused} timedOut={timed_out} {[a for _, a, _ in answers][:3]}")
    ok("flood: the excess is refused", refused > 0 and done > 0, f"done={done} refused={refused}")
    ok("flood: answered within the deadline", elapsed < 10, f"{elapsed:.1f}s")


def triggers(a, b, hooks, token):
    before = []

    def before_save(body, record):
        before.append(json.loads(json.dumps(body)))
        obj = body["object"]
        if obj.get("score", 0) < 0:
            return {"error": "score must not be negative"}
        obj["name"] = obj.get("name", "").upper()
        obj["checked"] = True
        return {"success": obj}

    hooks.on("/game/beforeSave", before_save)
    hooks.on("/game/afterSave", lambda body, r: {"success": True})
    hooks.on("/game/beforeDelete", lambda body, r: {"error": "locked"} if body["object"].get("locked") else {"success": True})
    hooks.on("/game/afterDelete", lambda body, r: {"success": True})
    for trigger in ["beforeSave", "afterSave", "beforeDelete", "afterDelete"]:
        status, answer, _ = parse(a, "POST", "/hooks/triggers", {"className": "Game", "triggerName": trigger, "url": hooks.url(f"/game/{trigger}")},
                                  master=True)
        ok(f"register {trigger}", status == 200, answer)

    status, created, _ = parse(b, "POST", "/classes/Game", {"name": "chess", "score": 5}, token=token)
    ok("create through beforeSave", status == 201 and "objectId" in created, created)
    game = created["objectId"]
    payload = before[-1]
    ok("beforeSave triggerName", payload["triggerName"] == "beforeSave", payload)
    ok("beforeSave object", payload["object"] == {"name": "chess", "score": 5, "className": "Game"}, payload["object"])
    ok("beforeSave has no original on create", "original" not in payload, payload)
    ok("beforeSave user/master/ip/headers", payload["user"]["username"] == "alice" and payload["master"] is False and payload["ip"] == "127.0.0.1"
       and payload["headers"]["x-parse-application-id"] == APP_ID, payload)
    status, stored, _ = parse(a, "GET", f"/classes/Game/{game}", token=token)
    ok("beforeSave's rewrite is stored", stored["name"] == "CHESS" and stored["checked"] is True and stored["score"] == 5, stored)
    after = wait_for("afterSave delivered", lambda: [r for r in hooks.received("/game/afterSave") if r["body"]["object"]["objectId"] == game])
    body = after[0]["body"]
    ok("afterSave object is the saved object", body["triggerName"] == "afterSave" and body["object"]["name"] == "CHESS"
       and body["object"]["checked"] is True and body["object"]["className"] == "Game" and "createdAt" in body["object"], body)
    ok("afterSave carries the webhook key", after[0]["headers"].get("x-parse-webhook-key") == WEBHOOK_KEY, after[0]["headers"])

    status, answer, _ = parse(a, "POST", "/classes/Game", {"name": "bad", "score": -1}, token=token)
    ok("beforeSave rejects with 141 and its message", status == 400 and answer == {"code": 141, "error": "score must not be negative"}, answer)
    status, found, _ = parse(a, "GET", "/classes/Game", master=True)
    ok("a rejected object is not stored", [g["name"] for g in found["results"]] == ["CHESS"], found)

    status, answer, _ = parse(a, "PUT", f"/classes/Game/{game}", {"score": {"__op": "Increment", "amount": 2}, "name": "go"}, token=token)
    ok("update through beforeSave", status == 200, answer)
    payload = before[-1]
    ok("beforeSave update: original is the stored object", payload["original"]["name"] == "CHESS" and payload["original"]["score"] == 5
       and payload["original"]["objectId"] == game, payload["original"])
    ok("beforeSave update: object has the changes applied", payload["object"]["score"] == 7 and payload["object"]["name"] == "go"
       and payload["object"]["objectId"] == game, payload["object"])
    status, stored, _ = parse(a, "GET", f"/classes/Game/{game}", token=token)
    ok("update rewritten and stored", stored["name"] == "GO" and stored["score"] == 7, stored)
    status, answer, _ = parse(a, "PUT", f"/classes/Game/{game}", {"score": -5}, token=token)
    ok("beforeSave rejects an update", answer == {"code": 141, "error": "score must not be negative"}, answer)
    wait_for("afterSave of the update has original", lambda: [r for r in hooks.received("/game/afterSave")
                                                               if r["body"].get("original", {}).get("name") == "CHESS"])

    # Batch sub-requests run the same triggers.
    status, answer, _ = parse(a, "POST", "/batch", {"requests": [
        {"method": "POST", "path": "/parse/classes/Game", "body": {"name": "b1", "score": 1}},
        {"method": "POST", "path": "/parse/classes/Game", "body": {"name": "b2", "score": -1}}]}, token=token)
    ok("batch: first created, second rejected by beforeSave", status == 200 and "success" in answer[0]
       and answer[1] == {"error": {"code": 141, "error": "score must not be negative"}}, answer)
    status, stored, _ = parse(a, "GET", f"/classes/Game/{answer[0]['success']['objectId']}", token=token)
    ok("batch sub-request rewritten", stored["name"] == "B1" and stored["checked"] is True, stored)
    status, answer, _ = parse(a, "POST", "/batch", {"transaction": True, "requests": [
        {"method": "POST", "path": "/parse/classes/Game", "body": {"name": "t1", "score": 1}}]}, token=token)
    ok("transactional batch with afterSave", status == 200 and "success" in answer[0], answer)
    t1 = answer[0]["success"]["objectId"]
    wait_for("afterSave of the transactional batch", lambda: [r for r in hooks.received("/game/afterSave") if r["body"]["object"]["objectId"] == t1])

    # Delete triggers.
    status, locked, _ = parse(a, "POST", "/classes/Game", {"name": "keep", "score": 1, "locked": True}, token=token)
    status, answer, _ = parse(a, "DELETE", f"/classes/Game/{locked['objectId']}", token=token)
    ok("beforeDelete rejects", answer == {"code": 141, "error": "locked"}, answer)
    status, _, _ = parse(a, "GET", f"/classes/Game/{locked['objectId']}", token=token)
    ok("rejected delete keeps the object", status == 200, status)
    status, answer, _ = parse(a, "DELETE", f"/classes/Game/{game}", token=token)
    ok("delete through beforeDelete", status == 200 and answer == {}, answer)
    deleted = wait_for("afterDelete delivered", lambda: [r for r in hooks.received("/game/afterDelete") if r["body"]["object"]["objectId"] == game])
    ok("afterDelete object", deleted[0]["body"]["triggerName"] == "afterDelete" and deleted[0]["body"]["object"]["name"] == "GO", deleted[0]["body"])
    bd = [r for r in hooks.received("/game/beforeDelete") if r["body"]["object"]["objectId"] == game]
    ok("beforeDelete object is the stored object", bd and bd[0]["body"]["object"]["score"] == 7 and bd[0]["body"]["object"]["className"] == "Game", bd)

    # Signup runs _User's beforeSave; the webhook never sees the password, which still works.
    user_payloads = []

    def user_before_save(body, record):
        user_payloads.append(json.loads(json.dumps(body)))
        obj = body["object"]
        obj["screenName"] = obj["username"].title()
        return {"success": obj}
    hooks.on("/user/beforeSave", user_before_save)
    parse(a, "POST", "/hooks/triggers", {"className": "_User", "triggerName": "beforeSave", "url": hooks.url("/user/beforeSave")}, master=True)
    status, signed, _ = parse(a, "POST", "/users", {"username": "bob", "password": "pw-bob"})
    ok("signup through _User beforeSave", status == 201 and "sessionToken" in signed, signed)
    ok("the webhook never sees the password", "password" not in user_payloads[-1]["object"], user_payloads[-1])
    status, me, _ = parse(a, "GET", "/users/me", token=signed["sessionToken"])
    ok("signup rewritten", me.get("screenName") == "Bob", me)
    status, login, _ = parse(a, "GET", "/login?username=bob&password=pw-bob")
    ok("the password survived the trigger", status == 200 and login["username"] == "bob", login)

    # Find triggers: beforeFind rejects; afterFind sees the objects and rewrites the answer (the
    # inline find path steps aside for a class with find triggers, on every node).
    finds = []

    def before_find(body, record):
        finds.append(body)
        return {"error": "secrets need the master key"} if not body["master"] else {"success": True}

    def after_find(body, record):
        finds.append(body)
        kept = [dict(o, seen=True) for o in body["objects"] if o.get("name") != "KEEP"]
        return {"success": kept}
    hooks.on("/secret/beforeFind", before_find)
    hooks.on("/game/afterFind", after_find)
    parse(a, "POST", "/classes/Secret", {"v": 1}, master=True)
    parse(a, "POST", "/hooks/triggers", {"className": "Secret", "triggerName": "beforeFind", "url": hooks.url("/secret/beforeFind")}, master=True)
    parse(a, "POST", "/hooks/triggers", {"className": "Game", "triggerName": "afterFind", "url": hooks.url("/game/afterFind")}, master=True)
    # Node B hears both registrations (NOTIFY): waited for, not slept on.
    wait_for("node B runs both find triggers", lambda: parse(b, "GET", "/classes/Secret", token=token)[0] == 400
             and "KEEP" not in [g["name"] for g in parse(b, "GET", "/classes/Game", token=token)[1].get("results", [])])
    status, answer, _ = parse(b, "GET", "/classes/Secret?" + urllib.parse.urlencode({"where": json.dumps({"v": 1}), "limit": 5}), token=token)
    ok("beforeFind rejects with 141", status == 400 and answer == {"code": 141, "error": "secrets need the master key"}, answer)
    payload = finds[-1]
    ok("beforeFind payload", payload["triggerName"] == "beforeFind" and payload["query"] == {"className": "Secret", "where": {"v": 1}, "limit": 5}
       and payload["isGet"] is False and payload["count"] is False and payload["user"]["username"] == "alice", payload)
    status, answer, _ = parse(b, "GET", "/classes/Secret", master=True)
    ok("beforeFind lets the master key read", status == 200 and len(answer["results"]) == 1, answer)
    for server in (a, b):
        status, answer, _ = parse(server, "GET", "/classes/Game", token=token)
        names = sorted(g["name"] for g in answer["results"])
        ok("afterFind rewrites the results (inline path declined)", "KEEP" not in names and names and all(g.get("seen") is True for g in answer["results"])
           and all("className" not in g for g in answer["results"]), answer)
    payload = finds[-1]
    ok("afterFind payload has the objects with className", payload["triggerName"] == "afterFind" and any(o["name"] == "KEEP" for o in payload["objects"])
       and all(o["className"] == "Game" for o in payload["objects"]), payload)
    status, answer, _ = parse(a, "GET", f"/classes/Game/{locked['objectId']}", token=token)
    ok("afterFind dropping the object of a get is 101", status == 404 and answer["code"] == 101, answer)
    ok("a get says isGet", finds[-1]["isGet"] is True and finds[-1]["query"]["where"] == {"objectId": locked["objectId"]}, finds[-1])
    parse(a, "DELETE", "/hooks/triggers/Game/afterFind", master=True)
    answer = wait_for("node B drops the afterFind trigger", lambda: (lambda r: r if "KEEP" in [g["name"] for g in r.get("results", [])] else None)(
        parse(b, "GET", "/classes/Game", token=token)[1]))
    ok("without afterFind the results are as stored", "KEEP" in [g["name"] for g in answer["results"]], answer)

    # Login triggers (on _User only).
    status, answer, _ = parse(a, "POST", "/hooks/triggers", {"className": "Game", "triggerName": "beforeLogin", "url": hooks.url("/x")}, master=True)
    ok("beforeLogin on another class is 143", answer == {"code": 143, "error": "invalid hook declaration"}, answer)
    logins = []

    def before_login(body, record):
        logins.append(body)
        return {"error": "carol is suspended"} if body["object"]["username"] == "carol" else {"success": True}
    hooks.on("/user/beforeLogin", before_login)
    hooks.on("/user/afterLogin", lambda body, r: {"success": True})
    for trigger in ["beforeLogin", "afterLogin"]:
        parse(a, "POST", "/hooks/triggers", {"className": "_User", "triggerName": trigger, "url": hooks.url(f"/user/{trigger}")}, master=True)
    parse(a, "POST", "/users", {"username": "carol", "password": "pw-carol"})
    status, answer, _ = parse(b, "GET", "/login?username=carol&password=pw-carol")
    ok("beforeLogin rejects with 141", status == 400 and answer == {"code": 141, "error": "carol is suspended"}, answer)
    status, answer, _ = parse(b, "GET", "/login?username=carol&password=wrong")
    ok("a wrong password never reaches beforeLogin", answer["code"] == 101 and logins[-1]["object"]["username"] == "carol" and len(
        [x for x in logins if x["object"]["username"] == "carol"]) == 1, answer)
    status, login, _ = parse(b, "POST", "/login", {"username": "bob", "password": "pw-bob"}, headers={"X-Parse-Installation-Id": "bob-phone"})
    ok("beforeLogin lets bob in", status == 200 and "sessionToken" in login, login)
    payload = logins[-1]
    ok("beforeLogin payload", payload["triggerName"] == "beforeLogin" and payload["object"]["username"] == "bob"
       and payload["object"]["className"] == "_User" and "password" not in payload["object"] and "sessionToken" not in payload["object"]
       and payload["installationId"] == "bob-phone" and "user" not in payload, payload)
    after_login = wait_for("afterLogin delivered", lambda: [r for r in hooks.received("/user/afterLogin") if r["body"]["object"]["username"] == "bob"])
    ok("afterLogin payload", after_login[0]["body"]["triggerName"] == "afterLogin" and after_login[0]["body"]["user"]["objectId"] == login["objectId"]
       and "sessionToken" not in after_login[0]["body"]["object"], after_login[0]["body"])
    for trigger in ["beforeLogin", "afterLogin"]:
        parse(a, "DELETE", f"/hooks/triggers/_User/{trigger}", master=True)

    # afterSave while the webhook fails: the request succeeds, the delivery is retried.
    failures = {"left": 3}

    def flaky(body, record):
        if failures["left"] > 0:
            failures["left"] -= 1
            return Raw(503, b"down")
        return {"success": True}
    hooks.on("/game/afterSave", flaky)
    status, created, _ = parse(a, "POST", "/classes/Game", {"name": "retry", "score": 1}, token=token)
    ok("afterSave failing never fails the request", status == 201, created)
    got = wait_for("afterSave retried until delivered", lambda: [r for r in hooks.received("/game/afterSave")
                                                                 if r["body"]["object"]["objectId"] == created["objectId"]] if failures["left"] == 0 and len(
        [r for r in hooks.received("/game/afterSave") if r["body"]["object"]["objectId"] == created["objectId"]]) >= 4 else None)
    ok("afterSave sent 4 times (3 failures, then delivered)", len(got) == 4, len(got))


def jobs(a, hooks, postgres, database):
    hooks.on("/job", lambda body, r: {"success": f"processed {body['params']['n']}"})
    parse(a, "POST", "/hooks/functions", {"functionName": "nightly", "url": hooks.url("/job")}, master=True)
    status, answer, headers = parse(a, "POST", "/jobs/nightly", {"n": 3}, master=True)
    job = headers.get("X-Parse-Job-Status-Id")
    ok("job accepted with X-Parse-Job-Status-Id", status == 200 and answer == {} and job, f"{status} {answer} {headers}")
    record = wait_for("job webhook called", lambda: [r for r in hooks.received("/job") if r["body"].get("jobId") == job])[0]
    ok("job request body", record["body"]["jobName"] == "nightly" and record["body"]["params"] == {"n": 3} and record["body"]["master"] is True, record["body"])
    status = wait_for("job succeeded", lambda: (lambda s: s if s[1].get("status") == "succeeded" else None)(parse(a, "GET", f"/classes/_JobStatus/{job}", master=True)))
    ok("_JobStatus row", status[1]["jobName"] == "nightly" and status[1]["message"] == "processed 3" and status[1]["params"] == {"n": 3}
       and status[1]["source"] == "api" and status[1]["finishedAt"]["__type"] == "Date", status[1])
    _, listed, _ = parse(a, "GET", "/classes/_JobStatus?where=" + urllib.request.quote(json.dumps({"jobName": "nightly"})), master=True)
    ok("_JobStatus is queryable", [r["objectId"] for r in listed["results"]] == [job], listed)
    s, answer, _ = parse(a, "GET", "/classes/_JobStatus")
    ok("_JobStatus is master-only", s == 400 and answer["code"] == 119, answer)
    s, answer, _ = parse(a, "POST", "/jobs/unknown", {}, master=True)
    ok("unknown job is 141", answer == {"code": 141, "error": "Invalid job: unknown"}, answer)
    hooks.on("/job-fail", lambda body, r: {"error": "disk full"})
    parse(a, "POST", "/hooks/functions", {"functionName": "failing", "url": hooks.url("/job-fail")}, master=True)
    _, _, headers = parse(a, "POST", "/jobs/failing", {}, master=True)
    failed = wait_for("job failed", lambda: (lambda s: s if s[1].get("status") == "failed" else None)(
        parse(a, "GET", f"/classes/_JobStatus/{headers['X-Parse-Job-Status-Id']}", master=True)))
    ok("failed job records the webhook's error", failed[1]["message"] == "disk full", failed[1])


def crash(a, hooks, postgres, database, token):
    down = {"on": True}
    hooks.on("/crash/afterSave", lambda body, r: Raw(503, b"down") if down["on"] else {"success": True})
    hooks.on("/crash/job", lambda body, r: Raw(503, b"down") if down["on"] else {"success": "ran"})
    parse(a, "POST", "/hooks/triggers", {"className": "Crash", "triggerName": "afterSave", "url": hooks.url("/crash/afterSave")}, master=True)
    parse(a, "POST", "/hooks/functions", {"functionName": "crashjob", "url": hooks.url("/crash/job")}, master=True)
    ids = []
    for i in range(5):
        status, created, _ = parse(a, "POST", "/classes/Crash", {"i": i}, token=token)
        check(status == 201, created)
        ids.append(created["objectId"])
    _, _, headers = parse(a, "POST", "/jobs/crashjob", {}, master=True)
    job = headers["X-Parse-Job-Status-Id"]
    wait_for("the failing webhook was tried", lambda: hooks.received("/crash/job") and hooks.received("/crash/afterSave"))
    a.kill()
    pending = int(postgres.psql(database, "SELECT count(*) FROM cloud_deliveries"))
    ok("deliveries are pending in PostgreSQL after SIGKILL", pending >= 6, pending)
    down["on"] = False
    hooks.clear()
    a.start()
    delivered = wait_for("after-triggers delivered after restart",
                         lambda: (lambda got: got if ids and set(ids) <= got else None)(
                             {r["body"]["object"]["objectId"] for r in hooks.received("/crash/afterSave") if r["body"] is not None}))
    ok("every afterSave delivered after restart", set(ids) <= delivered, delivered)
    try:
        status = wait_for("job re-sent after restart", lambda: (lambda s: s if s[1].get("status") == "succeeded" else None)(
            parse(a, "GET", f"/classes/_JobStatus/{job}", master=True)))
    except AssertionError:
        log(postgres.psql(database, "SELECT *, now() FROM cloud_deliveries"), postgres.psql(database, "SELECT * FROM cloud_jobs"))
        raise
    ok("job succeeded after restart", status[1]["message"] == "ran", status[1])
    wait_for("delivery table drained", lambda: postgres.psql(database, "SELECT count(*) FROM cloud_deliveries WHERE state <> 'dead'") == "0")


def hook_flood(a, hooks):
    status, answer, _ = parse(a, "POST", "/hooks/functions", {"functionName": "f" * 200, "url": hooks.url("/x")}, master=True)
    ok("an over-long function name is 143", answer == {"code": 143, "error": "invalid hook declaration"}, answer)
    status, answer, _ = parse(a, "POST", "/hooks/functions", {"functionName": "long-url", "url": hooks.url("/" + "x" * 3000)}, master=True)
    ok("an over-long url is 143", answer == {"code": 143, "error": "invalid hook declaration"}, answer)
    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(lambda i: parse(a, "POST", "/hooks/functions", {"functionName": f"flood{i}", "url": hooks.url(f"/f{i}")}, master=True),
                                range(1100)))
    refused = [ans for s, ans, _ in answers if ans.get("code") == 143]
    ok("hook flood: past 1000 hooks registration is refused with 143", refused and all(
        r["error"] == "too many hooks: at most 1000 functions and triggers" for r in refused), refused[:2])
    _, listed, _ = parse(a, "GET", "/hooks/functions", master=True)
    total = len(listed) + len(parse(a, "GET", "/hooks/triggers", master=True)[1])
    ok("hook flood: the table stays bounded (1000 plus at most the concurrent creates)", 1000 <= total <= 1032, total)
    with urllib.request.urlopen(a.http_url + "/health", timeout=5) as response:
        ok("server still serves after the hook flood", response.status == 200, response.status)


def main():
    postgres = TempPostgres()
    database = "cloud_code"
    url = postgres.create_database(database)
    hooks = WebhookService()
    a = ParleyServer(url, extra=FLAGS).start()
    b = ParleyServer(url, extra=FLAGS).start()
    try:
        status, alice, _ = parse(a, "POST", "/users", {"username": "alice", "password": "pw"})
        check(status == 201, alice)
        hooks_api(a, b, hooks)
        functions(a, hooks, alice["objectId"], alice["sessionToken"])
        triggers(a, b, hooks, alice["sessionToken"])
        jobs(a, hooks, postgres, database)
        b.stop()
        crash(a, hooks, postgres, database, alice["sessionToken"])
        hook_flood(a, hooks)
        log("cloud_code: all checks passed")
    except BaseException:
        log("--- node A log\n" + a.log())
        log("--- node B log\n" + b.log())
        raise
    finally:
        a.stop()
        b.stop()
        postgres.stop()


if __name__ == "__main__":
    main()
