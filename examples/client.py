#!/usr/bin/env python3
"""A rematd client from docs/protocol.md alone, in the standard library: what rematctl's
`start`, `watch` and `remat set` do, as an integrator would write it.

    client.py [--socket PATH] start SPEC.json [--name NAME]
    client.py [--socket PATH] watch JOB [--count N]
    client.py [--socket PATH] set JOB SELECTOR=MODE [SELECTOR=MODE ...] [--wait]

The socket: --socket, else $REMAT_SOCKET, else $XDG_RUNTIME_DIR/remat/rematd.sock when it
exists, else /run/remat/rematd.sock (rematctl(1)'s order). Exit status: 0, 1 when rematd
answered an error (its class and description on stderr), a watched job failed, or a change
waited for was not applied, 2 for a usage or connection error.
"""
import argparse
import json
import os
import socket
import sys

ENDED = {"finished", "stopped", "failed", "interrupted"}


class RematError(Exception):
    """An error reply: its class and description (docs/protocol.md, "Requests, replies")."""

    def __init__(self, cls, desc):
        super().__init__(f"{cls}: {desc}")
        self.cls = cls


class Conn:
    """One connection: newline-delimited JSON, the server's greeting first."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        self.next_id = 1
        self.events = []  # events read while waiting for a reply, in order
        greeting = self.read()
        remat = greeting.get("remat") if isinstance(greeting, dict) else None
        if not remat or remat.get("protocol") != 1 or remat.get("role") != "daemon":
            raise OSError(f"{path}: not rematd's protocol 1: {greeting}")

    def read(self):
        line = self.file.readline()
        if not line:
            raise OSError("rematd closed the connection")
        return json.loads(line)

    def request(self, execute, arguments=None):
        """The return of one request; events that come before it are kept in order."""
        rid = self.next_id
        self.next_id += 1
        msg = {"execute": execute, "id": rid}
        if arguments is not None:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        while True:
            m = self.read()
            if "event" in m:
                self.events.append(m)
            elif m.get("id") == rid and "error" in m:
                raise RematError(m["error"].get("class"), m["error"].get("desc"))
            elif m.get("id") == rid:
                return m.get("return")

    def event(self):
        """The next event: one kept while a reply was awaited, else the next line's."""
        while True:
            m = self.events.pop(0) if self.events else self.read()
            if "event" in m:
                return m


def socket_path(given):
    if given:
        return given
    if os.environ.get("REMAT_SOCKET"):
        return os.environ["REMAT_SOCKET"]
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.exists(os.path.join(run, "remat", "rematd.sock")):
        return os.path.join(run, "remat", "rematd.sock")
    return "/run/remat/rematd.sock"


def start(conn, args):
    with open(args.spec, encoding="utf-8") as f:
        spec = json.load(f)
    arguments = {"spec": spec}
    if args.name:
        arguments["name"] = args.name
    r = conn.request("job-start", arguments)
    print(f"{r['job']} {r['state']}")
    return 0


def watch(conn, args):
    """STEP events of the job, one line each, until it ends (or --count of them)."""
    conn.request("subscribe", {"job": args.job, "events": ["STEP", "JOB_STATE_CHANGED"]})
    st = conn.request("job-status", {"job": args.job})
    print(f"{args.job} {st['state']} at step {st['step']} of {st['steps']}")
    if st["state"] in ENDED:
        return 1 if st["state"] == "failed" else 0
    seen = 0
    while args.count is None or seen < args.count:
        e = conn.event()
        d = e.get("data", {})
        if d.get("job") != args.job:
            continue
        if e["event"] == "STEP":
            seen += 1
            print(f"step {d['step']} loss {d['loss']:.4f} {d['step_ms']:.1f} ms "
                  f"(recompute {d['recompute_ms']:.1f} ms)")
        elif e["event"] == "JOB_STATE_CHANGED":
            print(f"{args.job} {d['from']} -> {d['to']}: {d.get('reason', '')}")
            if d["to"] in ENDED:
                return 1 if d["to"] == "failed" else 0
    return 0


def remat_set(conn, args):
    sections = {}
    for a in args.assign:
        sel, eq, mode = a.partition("=")
        if not eq or not sel or not mode:
            raise SystemExit(f"client.py: '{a}' is not SELECTOR=MODE")
        sections[sel] = mode
    if args.wait:  # subscribed first: the outcome may follow the reply at once
        conn.request("subscribe", {"job": args.job, "events": [
            "REMAT_APPLIED", "REMAT_FAILED", "JOB_STATE_CHANGED"]})
    r = conn.request("remat-set", {"job": args.job, "sections": sections})
    policy = " ".join(f"{k}={v}" for k, v in r["policy"].items())
    print(f"applies at step {r['applies_at_step']}: {policy}")
    if not args.wait:
        return 0
    # the event whose change is this request's or a later one's (a later set built on it)
    while True:
        e = conn.event()
        d = e.get("data", {})
        if d.get("job") != args.job:
            continue
        if e["event"] == "JOB_STATE_CHANGED" and d["to"] in ENDED:
            print(f"{args.job} {d['to']} first: not applied", file=sys.stderr)
            return 1
        if d.get("at_resume"):  # the job ends first: the policy a resume runs under
            continue
        mine = (d.get("change") or 0) >= r["change"]
        if e["event"] in ("REMAT_APPLIED", "REMAT_FAILED") and mine:
            policy = " ".join(f"{k}={v}" for k, v in d["policy"].items())
            if e["event"] == "REMAT_FAILED":
                print(f"not applied at step {d['step']}: {d['reason']}", file=sys.stderr)
                return 1
            print(f"applied at step {d['step']} ({d['cause']}, change {d['change']}): {policy}")
            return 0


def main():
    p = argparse.ArgumentParser(description="a rematd client (docs/protocol.md)")
    p.add_argument("--socket")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="job-start a spec file")
    s.add_argument("spec")
    s.add_argument("--name")
    s.set_defaults(run=start)
    w = sub.add_parser("watch", help="a job's steps until it ends")
    w.add_argument("job")
    w.add_argument("--count", type=int)
    w.set_defaults(run=watch)
    r = sub.add_parser("set", help="remat-set: checkpointing by section")
    r.add_argument("job")
    r.add_argument("assign", nargs="+")
    r.add_argument("--wait", action="store_true", help="until its step says it applied")
    r.set_defaults(run=remat_set)
    args = p.parse_args()
    try:
        conn = Conn(socket_path(args.socket))
    except (OSError, ValueError) as e:
        print(f"client.py: {e}", file=sys.stderr)
        return 2
    try:
        return args.run(conn, args)
    except RematError as e:
        print(f"client.py: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as e:
        print(f"client.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
