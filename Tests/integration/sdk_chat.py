#!/usr/bin/env python3
"""parley-chat, the ParleyKit terminal example, driven through its interface in tmux.

Two users in two tmux sessions against a real `parley serve`: sign up through the Parse REST
API, set a location and list nearby users, chat with delivered and read receipts and presence,
place and answer a signalling-only call, page history, restart one client with its data
directory (acknowledged messages are not shown again), and SIGKILL both the server and a client
holding unsent messages: after both restart, each message arrives exactly once. Then the same
client against an `https://` server (a CA made with openssl): sign-up over HTTPS and messages over
WSS with `--tls-ca-file`, and the certificate refused without it (the system store). Every step waits
for the screen to show the expected line, never for a fixed time.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import ParleyServer, TempPostgres, built_binary, free_port, log  # noqa: E402
from tls import TestCA  # noqa: E402


class Pane:
    """One parley-chat in its own tmux session."""

    def __init__(self, name, command):
        self.session = f"parley-sdk-chat-{os.getpid()}-{name}"
        # The session starts with a shell-less placeholder so options are set before the program
        # runs; the pane stays after the program exits, so its last screen can be read.
        subprocess.run(["tmux", "new-session", "-d", "-s", self.session, "-x", "200", "-y", "60", "cat"], check=True)
        subprocess.run(["tmux", "set-option", "-t", self.session, "history-limit", "5000"], check=True)
        subprocess.run(["tmux", "set-option", "-t", self.session, "remain-on-exit", "on"], check=True)
        subprocess.run(["tmux", "respawn-pane", "-k", "-t", self.session, command], check=True)

    def type(self, line):
        subprocess.run(["tmux", "send-keys", "-t", self.session, "-l", line], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.session, "Enter"], check=True)

    def screen(self):
        result = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-5000", "-t", self.session],
                                stdout=subprocess.PIPE, text=True, check=True)
        return result.stdout

    def wait_for(self, pattern, timeout=20, count=1):
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(regex.findall(self.screen())) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.session}: no {pattern!r} within {timeout}s; screen:\n{self.screen()}")

    def kill(self):
        """SIGKILLs the program in the pane (and anything it started): the app is killed."""
        result = subprocess.run(["tmux", "display-message", "-p", "-t", self.session, "#{pane_pid}"],
                                stdout=subprocess.PIPE, text=True, check=True)
        pid = int(result.stdout.strip())
        pids = [pid]
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as children:
                pids += [int(child) for child in children.read().split()]
        except OSError:
            pass
        for each in reversed(pids):
            try:
                os.kill(each, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Dead when tmux says so (its "Pane is dead" line may be drawn later than the flag is set).
        deadline = time.time() + 20
        while time.time() < deadline:
            dead = subprocess.run(["tmux", "display-message", "-p", "-t", self.session, "#{pane_dead}"],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
            if dead == "1":
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.session}: the killed program's pane is not dead after 20 s; screen:\n{self.screen()}")

    def occurrences(self, text):
        return self.screen().count(text)

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.session], stderr=subprocess.DEVNULL)


def main():
    if not shutil.which("tmux"):
        raise RuntimeError("tmux is missing: bash scripts/setup.sh --all installs it")
    binary = built_binary("parley-chat", "PARLEY_CHAT_BIN")
    postgres = TempPostgres()
    server = ParleyServer(postgres.create_database("sdk_chat"), extra=["--call-grace-period", "5s"]).start()
    root = tempfile.mkdtemp(prefix="parley-chat-")
    panes = []

    def start(name, data=None):
        pane = Pane(name, f"{binary} --server {server.http_url} --data-dir {root}/{data or name}")
        panes.append(pane)
        pane.wait_for(r"parley-chat on http://")
        return pane

    try:
        alice, bob = start("alice"), start("bob")
        alice.type("/signup alice wonderland")
        bob.type("/signup bob builder")
        alice.wait_for(r"\* logged in as alice")
        bob.wait_for(r"\* logged in as bob")
        log("signed up and connected")

        alice.type("/where 48.8584 2.2945")
        bob.type("/where 48.8606 2.3376")
        alice.wait_for(r"\* location set")
        bob.wait_for(r"\* location set")
        alice.type("/nearby 10")
        alice.wait_for(r"\* nearby: bob")
        alice.type("/nearby 1")
        alice.wait_for(r"\* nobody within 1")
        log("nearby users listed")

        alice.type("/chat bob")
        bob.type("/chat alice")
        alice.wait_for(r"\* chatting with bob")
        bob.wait_for(r"\* chatting with alice")
        # Under the default `contacts` presence scope Bob's presence reaches Alice only once he
        # has written to her: she is told so, and watches him once his first message arrives.
        alice.wait_for(r"\* bob's presence shows once they have written to you")
        alice.type("hello from alice")
        bob.wait_for(r"^\[alice\] hello from alice$")
        alice.wait_for(r"sent: hello from alice")
        alice.wait_for(r"delivered by bob: hello from alice")
        bob.type("/read")
        bob.wait_for(r"\* marked 1 read")
        alice.wait_for(r"read by bob: hello from alice")
        bob.type("hi alice, 😀 here")
        alice.wait_for(r"^\[bob\] hi alice, 😀 here$")
        alice.wait_for(r"\* bob is online")
        log("messages, receipts and presence shown")

        alice.type("/call bob")
        alice.wait_for(r"\* calling bob")
        bob.wait_for(r"\* incoming call from alice")
        alice.wait_for(r"\* call ringing")
        bob.type("/answer")
        alice.wait_for(r"\* call answered")
        alice.wait_for(r"\* call established")
        alice.type("/hangup")
        alice.wait_for(r"\* call ended: hungUp")
        bob.wait_for(r"\* call ended: hungUp")
        bob.type("/call alice")
        alice.wait_for(r"\* incoming call from bob")
        alice.type("/decline")
        bob.wait_for(r"\* call ended: denied")
        log("calls placed, answered, hung up and declined")

        bob.type("/history")
        bob.wait_for(r"\* 2 messages")
        bob.wait_for(r"^  alice: hello from alice$")

        # Bob quits and starts again with the same data directory: nothing is shown twice.
        bob.type("/quit")
        bob.wait_for(r"^bye$")
        alice.wait_for(r"\* bob is offline")
        alice.type("while you were away")
        alice.wait_for(r"sent: while you were away")
        bob2 = start("bob-again", data="bob")
        bob2.type("/login bob builder")
        bob2.wait_for(r"\* logged in as bob")
        bob2.wait_for(r"^\[alice\] while you were away$")
        bob2.type("/status")
        bob2.wait_for(r"\* bob on [0-9a-f-]{36}: connected")
        assert bob2.occurrences("[alice] hello from alice") == 0, bob2.screen()
        alice.wait_for(r"delivered by bob: while you were away")

        # The server dies; Bob writes while it is down (the messages wait in his outbox), and
        # his app is killed too. After both restart, each message arrives exactly once.
        bob2.type("/chat alice")
        bob2.wait_for(r"\* chatting with alice")
        server.kill()
        bob2.wait_for(r"\* connection: reconnecting")
        bob2.type("written offline 1")
        bob2.type("written offline 2")
        bob2.wait_for(r"queued: written offline 2")
        bob2.kill()
        server.start()
        bob3 = start("bob-third", data="bob")
        bob3.type("/login bob builder")
        bob3.wait_for(r"\* logged in as bob")
        bob3.wait_for(r"sent: \(queued before a restart\)", count=2)
        alice.wait_for(r"^\[bob\] written offline 2$")
        alice.wait_for(r"^\[bob\] written offline 1$")
        bob3.type("/status")
        bob3.wait_for(r"\* bob on .*: connected")
        assert alice.occurrences("[bob] written offline 1") == 1, alice.screen()
        assert alice.occurrences("[bob] written offline 2") == 1, alice.screen()
        log("server and app killed with a full outbox: each message delivered once")

        # Bad input gets a clear answer and the client keeps working.
        bob3.type("/chat nobody-like-this")
        bob3.wait_for(r"\* no user nobody-like-this")
        bob3.type("/where north south")
        bob3.wait_for(r"usage: /where <lat> <lng>")
        bob3.type("/frobnicate")
        bob3.wait_for(r"\* unknown command /frobnicate")
        alice.type("/login alice wrong-password")
        alice.wait_for(r"! .*101")
        log("restart, abuse and errors handled")
        for pane in (alice, bob3):
            pane.type("/quit")
            pane.wait_for(r"^bye$")
        check_tls(binary, postgres, root, panes)
        print("sdk_chat: 1 passed, 0 failed")
    finally:
        for pane in panes:
            pane.close()
        server.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


def check_tls(binary, postgres, root, panes):
    """parley-chat on an https server: REST over HTTPS and the socket over WSS, verified."""
    ca = TestCA()
    certificate, key = ca.issue("localhost")
    tls_port = free_port()
    server = ParleyServer(postgres.create_database("sdk_chat_tls"),
                          extra=["--tls-cert", certificate, "--tls-key", key, "--tls-port", str(tls_port)]).start()
    url = f"https://localhost:{tls_port}"
    try:
        def start(name, trusted=True):
            options = f" --tls-ca-file {ca.ca}" if trusted else ""
            pane = Pane(name, f"{binary} --server {url}{options} --data-dir {root}/{name}")
            panes.append(pane)
            pane.wait_for(r"parley-chat on https://localhost")
            return pane

        alice, bob = start("tls-alice"), start("tls-bob")
        alice.type("/signup alice wonderland")
        bob.type("/signup bob builder")
        alice.wait_for(r"\* logged in as alice")
        bob.wait_for(r"\* logged in as bob")
        alice.type("/chat bob")
        bob.type("/chat alice")
        bob.wait_for(r"\* chatting with alice")
        alice.type("hello over wss")
        bob.wait_for(r"^\[alice\] hello over wss$")
        alice.wait_for(r"delivered by bob: hello over wss")
        alice.type("/status")
        alice.wait_for(r"\* alice on .*: connected")
        # Without the CA file the system store is used: the test CA is unknown, refused.
        stranger = start("tls-stranger", trusted=False)
        stranger.type("/login alice wonderland")
        stranger.wait_for(r"! TLS certificate verification failed: .*unable to get local issuer certificate")
        for pane in (alice, bob, stranger):
            pane.type("/quit")
            pane.wait_for(r"^bye$")
        log("https and wss with --tls-ca-file, refused without it")
    finally:
        server.stop()
        ca.close()


if __name__ == "__main__":
    main()
