#!/usr/bin/env python3
"""The Parse push API end to end: `parley serve` with a gorush-compatible sink as its gateway
(push_support.GorushSink), installations registered through /parse/installations and, for the
paging check, 2,500 made with SQL.

Checks: POST /push is master-key only (403) and refuses what Parse refuses (115: neither or both
of channels/where, both expirations, a bad interval or time, no data); a channel push and a
`where` push reach exactly the matching installations with a token, once each, with Parse's data
mapped onto gorush's fields (alert, title, sound, badge, content-available, category, custom keys
in data); `badge: "Increment"` raises each iOS installation's stored badge and sends the new
value; the answer is {"result":true} with X-Parse-Push-Status-Id, and `_PushStatus` (master
only) shows the push succeeded with numSent; push_time delays a push; an expired push sends
nothing; 2,500 matching installations (three pages) get exactly one notification each; a push
left half-queued by a stopped node (expired lease) is resumed from its cursor; qs-parse-rest's
TestPush passes and its pushes reach exactly the matching installations.
"""
import json
import os
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_support import APP_ID, MASTER_KEY, check, log, parse, wait_for  # noqa: E402
from push_support import GorushSink  # noqa: E402
from realtime_support import ParleyServer, TempPostgres  # noqa: E402


def ok(label, condition, detail=""):
    check(condition, f"{label}: {detail}")
    log(f"ok    {label}")


def tokens(sink):
    return [r["notification"]["tokens"][0] for r in sink.accepted()]


def status_of(server, push_id):
    return parse(server, "GET", f"/classes/_PushStatus/{push_id}", master=True)[1]


def run_parse_rest_push_tests(server):
    """Runs parse_rest.tests.TestPush with PARSE_API_ROOT at `server`; True when it passed."""
    settings = tempfile.mkdtemp(prefix="parley-parse-rest-")
    with open(os.path.join(settings, "settings_local.py"), "w") as f:
        f.write(f"APPLICATION_ID = {APP_ID!r}\nREST_API_KEY = 'unused'\nMASTER_KEY = {MASTER_KEY!r}\n")
    sys.path.insert(0, settings)
    os.environ["PARSE_API_ROOT"] = server.http_url + "/parse"
    import parse_rest.tests  # noqa: E402  (reads PARSE_API_ROOT and settings_local at import)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(parse_rest.tests.TestPush)
    return unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()


def main():
    postgres = TempPostgres()
    database = "cloud_push"
    url = postgres.create_database(database)
    sink = GorushSink()
    server = ParleyServer(url, extra=["--app-id", APP_ID, "--master-key", MASTER_KEY, "--push-gateway-url", sink.url,
                                      "--push-bundle-id", "com.example.app", "--push-poll-interval", "100ms",
                                      "--password-mem-limit", "8192", "--password-ops-limit", "1"]).start()
    try:
        installations = {
            "ios-sports": {"deviceType": "ios", "deviceToken": "tok-ios-sports", "channels": ["sports"], "badge": 3},
            "and-sports": {"deviceType": "android", "deviceToken": "tok-and-sports", "channels": ["sports", "news"]},
            "ios-news": {"deviceType": "ios", "deviceToken": "tok-ios-news", "channels": ["news"]},
            "no-token": {"deviceType": "ios", "channels": ["sports"]},
        }
        ids = {}
        for name, fields in installations.items():
            status, answer, _ = parse(server, "POST", "/installations", dict(fields, installationId=f"{name}-0000-install"))
            check(status in (200, 201), answer)
            ids[name] = answer["objectId"]

        status, answer, _ = parse(server, "POST", "/push", {"channels": ["sports"], "data": {"alert": "hi"}})
        ok("POST /push without the master key is 403", status == 403, f"{status} {answer}")
        for body, message in [({"data": {"alert": "x"}}, 'Sending a push requires either "channels" or a "where" query.'),
                              ({"channels": ["a"], "where": {}, "data": {"alert": "x"}}, "Channels and query can not be set at the same time."),
                              ({"channels": ["a"], "data": {"alert": "x"}, "expiration_time": "2030-01-01T00:00:00Z", "expiration_interval": 5},
                               "Both expiration_time and expiration_interval cannot be set"),
                              ({"channels": ["a"], "data": {"alert": "x"}, "expiration_interval": -1}, "expiration_interval must be a number greater than 0"),
                              ({"channels": ["a"], "data": {"alert": "x"}, "push_time": "tomorrow"}, '"tomorrow" is not a valid time.'),
                              ({"channels": ["a"]}, "Missing push data: data must be an object."),
                              ({"channels": ["a"], "data": {"badge": "Twice"}}, 'badge must be a number or "Increment"')]:
            status, answer, _ = parse(server, "POST", "/push", body, master=True)
            ok(f"refused with 115: {message}", status == 400 and answer == {"code": 115, "error": message}, f"{status} {answer}")
        status, answer, _ = parse(server, "POST", "/push", {"where": {"$bogus": 1}, "data": {"alert": "x"}}, master=True)
        ok("a bad where is refused before anything is queued", status == 400 and answer.get("code") in (102, 107), answer)

        # A channel push with Parse's data fields.
        data = {"alert": "Game on", "title": "Sports", "sound": "whistle.caf", "badge": "Increment", "content-available": 1,
                "category": "SCORE", "matchId": "m-42"}
        status, answer, headers = parse(server, "POST", "/push", {"channels": ["sports"], "data": data}, master=True)
        push_id = headers.get("X-Parse-Push-Status-Id")
        ok("channel push answers {result:true} with X-Parse-Push-Status-Id", status == 200 and answer == {"result": True} and push_id, f"{answer} {headers}")
        # "Exactly": once the push's status is succeeded every job is done, so nothing more comes.
        wait_for("push status succeeded", lambda: status_of(server, push_id).get("status") == "succeeded")
        got = {r["notification"]["tokens"][0]: r["notification"] for r in sink.accepted()}
        ok("exactly one notification per matching installation with a token", sorted(tokens(sink)) == ["tok-and-sports", "tok-ios-sports"], tokens(sink))
        ios, android = got["tok-ios-sports"], got["tok-and-sports"]
        ok("iOS notification fields", ios["platform"] == 1 and ios["message"] == "Game on" and ios["title"] == "Sports" and ios["sound"] == "whistle.caf"
           and ios["badge"] == 4 and ios["content_available"] is True and ios["category"] == "SCORE" and ios["topic"] == "com.example.app"
           and ios["data"] == {"matchId": "m-42"}, ios)
        ok("Android notification fields", android["platform"] == 2 and android["message"] == "Game on" and android["title"] == "Sports"
           and android["data"] == {"matchId": "m-42"} and "badge" not in android, android)
        _, stored, _ = parse(server, "GET", f"/installations/{ids['ios-sports']}", master=True)
        ok("the iOS installation's badge was incremented", stored["badge"] == 4, stored)
        status = wait_for("push status succeeded", lambda: (lambda s: s if s.get("status") == "succeeded" else None)(status_of(server, push_id)))
        ok("_PushStatus", status["numSent"] == 2 and status["numFailed"] == 0 and status["count"] == 2 and status["source"] == "rest"
           and json.loads(status["query"]) == {"channels": {"$in": ["sports"]}} and json.loads(status["payload"])["alert"] == "Game on", status)
        s, answer, _ = parse(server, "GET", f"/classes/_PushStatus/{push_id}")
        ok("_PushStatus is master-only", s == 400 and answer["code"] == 119, answer)

        # Increment again: the stored badge goes on from 4.
        sink.received.clear()
        _, _, headers = parse(server, "POST", "/push", {"where": {"deviceType": "ios"}, "data": {"alert": "again", "badge": "Increment"}}, master=True)
        wait_for("where push succeeded", lambda: status_of(server, headers["X-Parse-Push-Status-Id"]).get("status") == "succeeded")
        got = {r["notification"]["tokens"][0]: r["notification"] for r in sink.accepted()}
        ok("where push reaches exactly the iOS installations with a token", sorted(got) == ["tok-ios-news", "tok-ios-sports"], sorted(got))
        ok("badge increments per installation", got["tok-ios-sports"]["badge"] == 5 and got["tok-ios-news"]["badge"] == 1, got)

        # push_time in the future.
        sink.received.clear()
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
        _, _, headers = parse(server, "POST", "/push", {"channels": ["news"], "push_time": at, "data": {"alert": "later"}}, master=True)
        time.sleep(1)
        ok("a scheduled push is not sent before its push_time", sink.accepted() == [], tokens(sink))
        ok("_PushStatus says scheduled", status_of(server, headers["X-Parse-Push-Status-Id"])["status"] == "scheduled", status_of(server, headers["X-Parse-Push-Status-Id"]))
        wait_for("scheduled push sent", lambda: len(sink.accepted()) >= 2, timeout=10)
        ok("scheduled push sent after push_time to the news channel", sorted(tokens(sink)) == ["tok-and-sports", "tok-ios-news"], tokens(sink))

        # Already expired: nothing is sent.
        sink.received.clear()
        _, _, headers = parse(server, "POST", "/push", {"channels": ["news"], "expiration_time": "2020-01-01T00:00:00Z", "data": {"alert": "old"}}, master=True)
        expired = wait_for("expired push finished", lambda: (lambda s: s if s.get("status") == "succeeded" else None)(status_of(server, headers["X-Parse-Push-Status-Id"])))
        ok("an expired push sends nothing", sink.accepted() == [] and expired["numFailed"] == 2 and expired["numSent"] == 0, expired)

        # 2,500 installations: three pages, one notification each.
        postgres.psql(database, """
            INSERT INTO installations (object_id, installation_id, device_type, device_token, data)
            SELECT 'bulk' || lpad(i::text, 6, '0'), 'bulk-install-' || i, CASE WHEN i % 2 = 0 THEN 'ios' ELSE 'android' END, 'bulk-token-' || i,
                   '{"channels": ["bulk"]}'::jsonb
              FROM generate_series(1, 2500) i
        """)
        sink.received.clear()
        started = time.time()
        _, _, headers = parse(server, "POST", "/push", {"channels": ["bulk"], "data": {"alert": "everyone", "badge": "Increment"}}, master=True)
        wait_for("2,500 notifications", lambda: len(sink.accepted()) >= 2500, timeout=60)
        time.sleep(1)
        sent = tokens(sink)
        ok("2,500 installations get exactly one notification each", len(sent) == 2500 and len(set(sent)) == 2500, len(sent))
        log(f"      2,500 pushes queued and sent in {time.time() - started:.1f}s")
        ok("bulk badges incremented once", postgres.psql(database, "SELECT count(*) FROM installations WHERE object_id LIKE 'bulk%' AND data->>'badge' = '1'") == "1250", "")

        # A push whose node stopped mid-way (lease expired, cursor half-way): another pass of
        # the resumer queues exactly the rest.
        sink.received.clear()
        postgres.psql(database, """
            SELECT push_create_parse('resumePush', '{"channels": {"$in": ["bulk"]}}', '{"alert": "resumed"}', NULL, NULL, NULL, -1000);
            UPDATE push_statuses SET cursor = 'bulk001250' WHERE object_id = 'resumePush';
        """)
        wait_for("the resumed push is sent", lambda: len(sink.accepted()) >= 1250, timeout=30)
        time.sleep(1)
        sent = tokens(sink)
        ok("a resumed push queues exactly the installations after its cursor", sorted(sent) == sorted(f"bulk-token-{i}" for i in range(1251, 2501)),
           len(sent))
        resumed = wait_for("resumed push succeeded", lambda: (lambda s: s if s.get("status") == "succeeded" else None)(status_of(server, "resumePush")))
        ok("resumed _PushStatus", resumed["count"] == 1250 and resumed["numSent"] == 1250, resumed)

        # qs-parse-rest's own push tests (parse_rest.tests.TestPush), against this server.
        for name, fields in {"giants-fan": {"deviceType": "ios", "deviceToken": "tok-giants", "channels": ["Giants"], "scores": True},
                             "mets-fan": {"deviceType": "android", "deviceToken": "tok-mets", "channels": ["Mets"], "scores": True}}.items():
            parse(server, "POST", "/installations", dict(fields, installationId=f"{name}-0000-install"))
        sink.received.clear()
        ok("qs-parse-rest TestPush passes", run_parse_rest_push_tests(server), "see the unittest output above")
        wait_for("TestPush pushes delivered", lambda: len(sink.accepted()) >= 4)
        time.sleep(1)
        ok("TestPush: one notification per matching installation and push", sorted(tokens(sink)) == ["tok-giants", "tok-giants", "tok-mets", "tok-mets"],
           tokens(sink))
        log("cloud_push: all checks passed")
    except BaseException:
        log("--- server log\n" + server.log())
        raise
    finally:
        server.stop()
        sink.close()
        postgres.stop()


if __name__ == "__main__":
    main()
