#!/usr/bin/env python3
"""Measures the peak resident size (wait4's ru_maxrss) of `bankconf run` (release build) against
the embedded sandbox and against a loopback target whose transaction pages, about 1 MB each,
never end. The budget these must stay within is in docs/checks.md "Hostile targets".
Usage: scripts/peak-rss.py  (builds the release binary first)"""
import http.server, json, os, subprocess, sys, threading

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(ROOT, "target", "release", "bankconf")
ITEM = {"accountId": "acc_1", "amount": -1.5, "currency": "EUR", "description": "x" * 200,
        "transactionDate": "2026-01-01", "category": "groceries", "status": "posted",
        "createdAt": "2026-01-01T00:00:00Z"}
DATA = json.dumps([dict(ITEM, id=f"txn_{i:08}") for i in range(3500)])


class Fat(http.server.BaseHTTPRequestHandler):
    """Creates connections, lists one account, and serves pages that never end."""
    count = 0

    def answer(self):
        if self.path.startswith("/v1/connections") and self.path.endswith("/accounts"):
            body = json.dumps([{"id": "acc_1", "connectionId": "conn_1", "type": "checking"}])
        elif self.path.startswith("/v1/connections"):
            body = json.dumps({"connectionId": "conn_1", "status": "CREATED", "widgetToken": "sess_1"})
        elif "/transactions" in self.path:
            Fat.count += 1
            body = f'{{"data":{DATA},"has_more":true,"next_cursor":"cursor_{Fat.count}"}}'
        else:
            self.send_response(404); self.end_headers(); return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


def peak(args):
    child = subprocess.Popen([BIN, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss >> 10


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    runs = {
        "sandbox": ["run", "--driver", "./examples/sandbox-driver.sh"],
        "never-ending 1 MB pages": ["run", "--base-url", url, "--api-key", "k_secret0123456789",
                                    "--driver", "exit 0", "--event-timeout", "0.3"],
    }
    for name, args in runs.items():
        code, mib = peak(args)
        print(f"{name}: exit {code}, peak resident size {mib} MiB")


if __name__ == "__main__":
    sys.exit(main())
