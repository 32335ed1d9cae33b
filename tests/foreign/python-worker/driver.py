#!/usr/bin/env python3
"""Driver for bankconf (docs/driver.md): forwards the action named in BANKCONF_* to the server's
admin endpoint as one JSON POST and exits with the code the server answers ({"exit": n}).

Usage: python3 driver.py --admin http://127.0.0.1:PORT/__admin/action

Standard library only, and only light modules (a plain socket rather than urllib), because
bankconf starts many driver calls at once and interpreter start-up is most of their cost.
"""
import json
import os
import socket
import sys

FIELDS = (
    ("BANKCONF_ACTION", "action"),
    ("BANKCONF_CONNECTION_ID", "connectionId"),
    ("BANKCONF_WIDGET_TOKEN", "widgetToken"),
    ("BANKCONF_ACCOUNT_ID", "accountId"),
    ("BANKCONF_TRANSACTION_ID", "transactionId"),
    ("BANKCONF_WEBHOOK_URL", "webhookUrl"),
    ("BANKCONF_SECOND_WEBHOOK_URL", "secondWebhookUrl"),
    # keys by value: the admin endpoint listens on loopback only and logs nothing
    ("BANKCONF_API_KEY", "apiKey"),
    ("BANKCONF_SECOND_API_KEY", "secondApiKey"),
)


def fail(msg, code=1):
    sys.stderr.write("driver: %s\n" % msg)
    return code


def main(argv):
    admin = None
    for i, a in enumerate(argv):
        if a == "--admin" and i + 1 < len(argv):
            admin = argv[i + 1]
        elif a.startswith("--admin="):
            admin = a.split("=", 1)[1]
    if not admin or not admin.startswith("http://"):
        return fail("usage: driver.py --admin http://HOST:PORT/PATH", 2)
    payload = {f: os.environ[e] for e, f in FIELDS if os.environ.get(e)}
    if "action" not in payload:
        return fail("BANKCONF_ACTION is not set", 2)
    rest = admin[len("http://"):]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    if not host:
        host, port = hostport, "80"
    body = json.dumps(payload).encode()
    head = ("POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path, hostport, len(body))).encode()
    try:
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=25)
        s.sendall(head + body)
        chunks = []
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
        s.close()
    except OSError as e:
        return fail("admin endpoint unreachable: %s" % e.__class__.__name__)
    raw = b"".join(chunks)
    head, _, rbody = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
    if status != 200:
        return fail("admin endpoint answered %s" % status)
    try:
        answer = json.loads(rbody or b"{}")
    except ValueError:
        return fail("admin endpoint answered no JSON")
    code = int(answer.get("exit", 1))
    if answer.get("stdout"):
        sys.stdout.write(answer["stdout"] + "\n")
        sys.stdout.flush()
    if code != 0 and answer.get("message"):
        sys.stderr.write("driver: %s\n" % answer["message"])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
