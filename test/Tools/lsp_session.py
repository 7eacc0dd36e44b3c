"""Drives flexsn-lsp-server over LSP's real framing, as an editor would, and
checks that it stays alive.

    lsp_session.py SERVER documents FILE...   each file opened, then typed
                                              in one character at a time
                                              (prefixes), each followed by a
                                              hover request that must be
                                              answered
    lsp_session.py SERVER open FILE...        each file opened (no typing)
    lsp_session.py SERVER framing             malformed messages (LF-only
                                              headers, spaces, a huge
                                              Content-Length, JSON that is no
                                              object or nests 50,000 deep)
                                              answered with errors, then a
                                              request still answered

Prints one line per check and `session: N passed, 0 failed` at the end;
exits 1 at the first failure (the server died, or a request went
unanswered).
"""

import json
import select
import subprocess
import sys
import time

TIMEOUT = 60.0


class Session:
    def __init__(self, server):
        self.process = subprocess.Popen(
            [server],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer = b""
        self.next_id = 1
        self.passed = 0

    def send_raw(self, data: bytes):
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict):
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method, params):
        self.next_id += 1
        self.send(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": method,
                "params": params,
            }
        )
        return self.next_id

    def read_message(self, deadline):
        while True:
            header_end = self.buffer.find(b"\r\n\r\n")
            if header_end >= 0:
                headers = self.buffer[:header_end].decode()
                length = int(headers.split(":")[1])
                start = header_end + 4
                if len(self.buffer) >= start + length:
                    body = self.buffer[start : start + length]
                    self.buffer = self.buffer[start + length :]
                    return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select(
                [self.process.stdout], [], [], remaining
            )
            if not ready:
                return None
            chunk = self.process.stdout.read1(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    def answer(self, id_):
        """The response to request `id_` (other messages skipped)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self.read_message(deadline)
            if message is None:
                return None
            if message.get("id") == id_ and "method" not in message:
                return message

    def error_answer(self):
        """The next error response with a null id (a rejected message)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self.read_message(deadline)
            if message is None:
                return None
            if "error" in message and message.get("id") is None:
                return message

    def check(self, what, ok):
        print(("ok: " if ok else "FAILED: ") + what)
        if not ok:
            print(f"session: {self.passed} passed, 1 failed")
            sys.exit(1)
        self.passed += 1

    def alive(self, what, uri="test:///probe.mlir"):
        id_ = self.request(
            "textDocument/hover",
            {
                "textDocument": {"uri": uri},
                "position": {"line": 0, "character": 0},
            },
        )
        self.check(
            what, self.answer(id_) is not None and self.process.poll() is None
        )

    def start(self):
        id_ = self.request(
            "initialize",
            {"processId": None, "rootUri": None, "capabilities": {}},
        )
        reply = self.answer(id_)
        self.check("initialize answered", reply is not None)
        sync = reply["result"]["capabilities"]["textDocumentSync"]
        self.check("full-text sync", sync.get("change") == 1)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def finish(self):
        id_ = self.request("shutdown", None)
        self.check("shutdown answered", self.answer(id_) is not None)
        self.send({"jsonrpc": "2.0", "method": "exit"})
        self.process.stdin.close()
        code = self.process.wait(TIMEOUT)
        self.check("exit code 0", code == 0)
        print(f"session: {self.passed} passed, 0 failed")


def documents(session, paths, typing=True):
    for k, path in enumerate(paths):
        text = open(path, "rb").read().decode("utf-8", errors="replace")
        uri = f"test:///doc{k}.mlir"
        session.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "mlir",
                        "version": 1,
                        "text": text,
                    }
                },
            }
        )
        session.alive(f"alive after opening {path}", uri)
        if typing:
            type_last_line(session, uri, text, path)
        session.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didClose",
                "params": {"textDocument": {"uri": uri}},
            }
        )


def type_last_line(session, uri, text, path):
    """The last line (at most 120 characters) typed in one character at a
    time: every half-typed prefix."""
    head, _, last = text.rstrip("\n").rpartition("\n")
    for n in range(1, min(len(last), 120) + 1):
        session.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": n + 1},
                    "contentChanges": [{"text": head + "\n" + last[:n]}],
                },
            }
        )
    session.alive(f"alive after typing the last line of {path}", uri)


def framing(session):
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 900,
            "method": "textDocument/hover",
            "params": {
                "textDocument": {"uri": "test:///x.mlir"},
                "position": {"line": 0, "character": 0},
            },
        }
    ).encode()
    session.send_raw(b"Content-Length: %d\n\n" % len(body) + body)
    session.check("LF-only headers", session.answer(900) is not None)
    body = body.replace(b"900", b"901")
    session.send_raw(b"Content-Length:   %d   \r\n\r\n" % len(body) + body)
    session.check("spaces around the length", session.answer(901) is not None)
    session.send_raw(b"Content-Length: 2\r\n\r\n[]")
    session.check(
        "an array is answered with an error",
        session.error_answer() is not None,
    )
    deep = b"[" * 50000 + b"]" * 50000
    session.send_raw(b"Content-Length: %d\r\n\r\n" % len(deep) + deep)
    session.check(
        "50,000 levels of nesting answered with an error",
        session.error_answer() is not None,
    )
    session.alive("alive after the malformed messages")
    # Last: a message claiming a gigabyte is skipped as it arrives, never
    # allocated; the input then ends inside it.
    session.send_raw(b"Content-Length: 1000000000\r\n\r\n")


def main():
    server, mode, *paths = sys.argv[1:]
    session = Session(server)
    session.start()
    if mode in ("documents", "open"):
        documents(session, paths, typing=mode == "documents")
    else:
        framing(session)
        session.process.stdin.close()
        code = session.process.wait(TIMEOUT)
        session.check(
            "ends at the end of its input, inside the gigabyte", code == 0
        )
        print(f"session: {session.passed} passed, 0 failed")
        return
    session.finish()


if __name__ == "__main__":
    main()
