#!/usr/bin/env python3
"""Cloud Code and push bounds end to end: `parley serve` on a real PostgreSQL, a gorush-compatible
sink, a webhook service written for the test (cloud_support.WebhookService), and the `parley user`
admin CLI run as a separate process against the same database.

Checks:
- POST /push paging cap (--push-paging-concurrency 1): four pushes to 2,500 installations sent at
  once all answer {"result":true} at once; those over the cap wait recorded ("push waits for a
  paging slot") and are paged after; every installation gets exactly one notification per push
  and every _PushStatus succeeds with count 2,500.
- Bounded after-trigger deliveries (--webhook-max-deliveries 40): a flood of 300 afterSave
  deliveries (batch sub-requests) to a dead webhook is trimmed to the cap, oldest first, with
  parley_cloud_deliveries_dropped_total and a log line; the newest delivery is kept; the server
  keeps serving. A delivery still failing past --webhook-delivery-max-age is dead although its
  attempts are not used up.
- The admin CLI's writes run _User's triggers: `parley user create` goes through beforeSave (its
  rewrite is stored, its refusal or timeout fails the command with 141 and creates nothing; a bad
  webhook option is a usage error) and afterSave
  (delivered by the serving node); `parley user reset-password` through beforeSave (never seeing
  the password); `parley user delete` through beforeDelete (a refusal keeps the user) and
  afterDelete.
"""
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_support import APP_ID, MASTER_KEY, WEBHOOK_KEY, Raw, WebhookService, check, log, parse, wait_for  # noqa: E402
from push_support import GorushSink  # noqa: E402
from realtime_support import REPO, ParleyServer, TempPostgres, parley_binary  # noqa: E402

COMMON = ["--app-id", APP_ID, "--master-key", MASTER_KEY, "--password-mem-limit", "8192", "--password-ops-limit", "1",
          "--log-level", "notice", "--allow-client-class-creation"]


def ok(label, condition, detail=""):
    check(condition, f"{label}: {detail}")
    log(f"ok    {label}")


def full_log(server):
    with open(server.log_path) as f:
        return f.read()


def dead_url():
    """A URL nothing listens on (a port just closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/dead"


def push_cap(postgres):
    database = "cloud_ops_push"
    url = postgres.create_database(database)
    sink = GorushSink()
    server = ParleyServer(url, extra=COMMON + ["--push-gateway-url", sink.url, "--push-poll-interval", "100ms",
                                               "--push-paging-concurrency", "1"]).start()
    try:
        postgres.psql(database, """
            INSERT INTO installations (object_id, installation_id, device_type, device_token, data)
            SELECT 'cap' || lpad(i::text, 6, '0'), 'cap-install-' || i, 'android', 'cap-token-' || i, '{"channels": ["cap"]}'::jsonb
              FROM generate_series(1, 2500) i
        """)
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda n: parse(server, "POST", "/push", {"channels": ["cap"], "data": {"alert": f"wave {n}"}}, master=True),
                                    range(4)))
        ids = [headers.get("X-Parse-Push-Status-Id") for _, _, headers in answers]
        ok("four pushes over a cap of one all answer {result:true} with a status id",
           all(status == 200 and answer == {"result": True} for status, answer, _ in answers) and all(ids) and len(set(ids)) == 4, answers)
        wait_for("10,000 notifications", lambda: len(sink.accepted()) >= 10000, timeout=120)
        time.sleep(1)
        sent = [r["notification"]["tokens"][0] for r in sink.accepted()]
        counts = {}
        for token in sent:
            counts[token] = counts.get(token, 0) + 1
        ok("every installation gets exactly one notification per push", len(sent) == 10000 and len(counts) == 2500
           and set(counts.values()) == {4}, f"{len(sent)} sent, {len(counts)} tokens")
        waited = full_log(server).count("push waits for a paging slot")
        ok("pushes over the cap waited for a paging slot", waited >= 1, f"{waited} waited")
        for push_id in ids:
            status = wait_for(f"push {push_id} succeeded", lambda: (lambda s: s if s.get("status") == "succeeded" else None)(
                parse(server, "GET", f"/classes/_PushStatus/{push_id}", master=True)[1]))
            check(status["count"] == 2500 and status["numSent"] == 2500, status)
        ok("every _PushStatus succeeded with count 2,500", True)
    except BaseException:
        log("--- server log\n" + server.log())
        raise
    finally:
        server.stop()
        sink.close()


def run_cli(url, *arguments, stdin=None, options=()):
    """`parley <arguments>` against `url` with the webhook key and a 2 s webhook timeout (`options` come last, so they win)."""
    command = [parley_binary(), *arguments, "--database-url", url, "--migrations-dir", os.path.join(REPO, "migrations"),
               "--webhook-key", WEBHOOK_KEY, "--webhook-timeout", "2s", *options]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def deliveries_and_cli(postgres):
    database = "cloud_ops_cloud"
    url = postgres.create_database(database)
    hooks = WebhookService()
    server = ParleyServer(url, extra=COMMON + ["--webhook-key", WEBHOOK_KEY, "--webhook-poll-interval", "100ms", "--webhook-backoff-base", "20ms",
                                               "--webhook-backoff-max", "100ms", "--webhook-max-attempts", "1000",
                                               "--webhook-max-deliveries", "40", "--webhook-delivery-max-age", "2s"]).start()
    try:
        # A flood of afterSave deliveries to a dead webhook stays bounded.
        parse(server, "POST", "/hooks/triggers", {"className": "Flood", "triggerName": "afterSave", "url": dead_url()}, master=True)
        for wave in range(6):
            requests = [{"method": "POST", "path": "/parse/classes/Flood", "body": {"n": wave * 50 + i}} for i in range(50)]
            status, answer, _ = parse(server, "POST", "/batch", {"requests": requests}, master=True)
            check(status == 200 and all("success" in item for item in answer), answer)
        newest = int(postgres.psql(database, "SELECT max(id) FROM cloud_deliveries"))
        count = wait_for("the deliveries trimmed to the cap",
                         lambda: (lambda n: n if n <= 40 else None)(int(postgres.psql(database, "SELECT count(*) FROM cloud_deliveries"))), timeout=20)
        ok("300 afterSave deliveries to a dead webhook are trimmed to the cap of 40", count <= 40, count)
        dropped = server.metric("parley_cloud_deliveries_dropped_total")
        ok("parley_cloud_deliveries_dropped_total counts the dropped deliveries", dropped is not None and dropped >= 260, dropped)
        ok("the drop is logged", "webhook deliveries over the cap dropped" in full_log(server), "")
        kept = postgres.psql(database, f"SELECT count(*) FROM cloud_deliveries WHERE id = {newest}")
        ok("the newest delivery is kept", kept == "1", kept)
        status, _, _ = parse(server, "POST", "/classes/Other", {"x": 1}, master=True)
        ok("the server keeps serving", status == 201, status)
        # Past --webhook-delivery-max-age (2 s) a failing delivery is dead, attempts left or not.
        wait_for("deliveries dead by age", lambda: postgres.psql(
            database, "SELECT count(*) FROM cloud_deliveries WHERE state = 'dead' AND attempts < 1000") != "0", timeout=20)
        ok("a delivery failing past its max age is dead with attempts left", True)
        ok("parley_cloud_deliveries_dead_total counts it", (server.metric("parley_cloud_deliveries_dead_total") or 0) >= 1, "")

        # The admin CLI's user writes run _User's triggers.
        seen = {"bs": [], "as": [], "bd": [], "ad": []}

        def before_save(body, record):
            seen["bs"].append(body)
            obj = body["object"]
            if obj.get("username", "").startswith("reject"):
                return {"error": "no rejects here"}
            if obj.get("username") == "slow-erin":
                return Raw(200, b'{"success":{}}', delay=3)
            obj["screenName"] = obj.get("username", "?").title()
            return {"success": obj}

        def before_delete(body, record):
            seen["bd"].append(body)
            return {"error": "carol stays"} if body["object"].get("username") == "carol" else {"success": True}

        hooks.on("/u/bs", before_save)
        hooks.on("/u/as", lambda body, record: seen["as"].append(body) or {"success": True})
        hooks.on("/u/bd", before_delete)
        hooks.on("/u/ad", lambda body, record: seen["ad"].append(body) or {"success": True})
        for trigger, path in [("beforeSave", "/u/bs"), ("afterSave", "/u/as"), ("beforeDelete", "/u/bd"), ("afterDelete", "/u/ad")]:
            status, answer, _ = parse(server, "POST", "/hooks/triggers", {"className": "_User", "triggerName": trigger, "url": hooks.url(path)},
                                      master=True)
            check(status == 200, answer)

        code, out, err = run_cli(url, "user", "create", "alice", "--email", "alice@example.com", "--json")
        ok("parley user create succeeds through beforeSave", code == 0, f"{code} {out} {err}")
        alice = json.loads(out)["objectId"]
        request = [r for r in hooks.received("/u/bs") if r["body"]["object"].get("username") == "alice"]
        ok("beforeSave got the CLI's user with the webhook key, as master, no password",
           request and request[0]["headers"].get("x-parse-webhook-key") == WEBHOOK_KEY and request[0]["body"]["master"] is True
           and request[0]["body"]["triggerName"] == "beforeSave" and request[0]["body"]["object"]["email"] == "alice@example.com"
           and "password" not in request[0]["body"]["object"], request)
        _, stored, _ = parse(server, "GET", f"/users/{alice}", master=True)
        ok("beforeSave's rewrite is stored", stored.get("screenName") == "Alice", stored)
        after = wait_for("afterSave of alice delivered by the serving node",
                         lambda: [b for b in seen["as"] if b["object"].get("objectId") == alice], timeout=20)
        ok("afterSave got the saved user", after[0]["triggerName"] == "afterSave" and after[0]["object"]["screenName"] == "Alice", after[0])

        code, out, err = run_cli(url, "user", "create", "reject-bob")
        ok("a beforeSave refusal fails parley user create with 141", code == 1 and "no rejects here" in err and "141" in err, f"{code} {out} {err}")
        exists = postgres.psql(database, "SELECT count(*) FROM users WHERE username = 'reject-bob'")
        ok("the refused user was not created", exists == "0", exists)

        code, out, err = run_cli(url, "user", "create", "slow-erin")
        ok("a beforeSave past --webhook-timeout fails parley user create with 141", code == 1 and "Webhook timed out." in err and "141" in err,
           f"{code} {out} {err}")
        ok("the timed-out user was not created", postgres.psql(database, "SELECT count(*) FROM users WHERE username = 'slow-erin'") == "0", "")
        code, out, err = run_cli(url, "user", "create", "frank", options=["--webhook-timeout", "soon"])
        ok("a bad webhook option is a usage error (exit 2) naming it", code == 2 and "webhook-timeout" in err, f"{code} {out} {err}")
        ok("nothing was created with the bad option", postgres.psql(database, "SELECT count(*) FROM users WHERE username = 'frank'") == "0", "")

        before = len(seen["bs"])
        code, out, err = run_cli(url, "user", "reset-password", "alice", "--password-stdin", stdin="n3w-pass-word\n")
        ok("parley user reset-password succeeds through beforeSave", code == 0 and len(seen["bs"]) == before + 1, f"{code} {out} {err}")
        last = seen["bs"][-1]
        ok("reset-password's beforeSave sees the user and its original, never the password",
           last["object"].get("objectId") == alice and last.get("original", {}).get("objectId") == alice and "password" not in last["object"], last)
        status, login, _ = parse(server, "GET", "/login?username=alice&password=n3w-pass-word")
        ok("the new password works", status == 200, login)

        code, out, err = run_cli(url, "user", "create", "carol")
        check(code == 0, err)
        code, out, err = run_cli(url, "user", "delete", "carol")
        ok("a beforeDelete refusal fails parley user delete with 141", code == 1 and "carol stays" in err, f"{code} {out} {err}")
        ok("the refused delete kept the user", postgres.psql(database, "SELECT count(*) FROM users WHERE username = 'carol'") == "1", "")
        code, out, err = run_cli(url, "user", "delete", "alice")
        ok("parley user delete succeeds through beforeDelete", code == 0 and any(b["object"].get("objectId") == alice for b in seen["bd"]),
           f"{code} {out} {err}")
        wait_for("afterDelete of alice delivered", lambda: [b for b in seen["ad"] if b["object"].get("objectId") == alice], timeout=20)
        ok("afterDelete got the deleted user", True)
    except BaseException:
        log("--- server log\n" + server.log())
        raise
    finally:
        server.stop()


def main():
    postgres = TempPostgres()
    try:
        push_cap(postgres)
        deliveries_and_cli(postgres)
        log("cloud_ops: all checks passed")
    finally:
        postgres.stop()


if __name__ == "__main__":
    main()
