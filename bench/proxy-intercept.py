#!/usr/bin/python3
"""Interception against the tunnel, in one run; run by bench/proxy.

proxy-intercept.py PROXY_PORT PID HOST:PORT SERVER_CA TASK_CA --bytes N
                   --seconds S --idle N

HOST:PORT is a loopback HTTPS service (t/tls-echo) that the proxy intercepts
when named as localhost:PORT (a rule of --secrets-fd) and tunnels when named
as 127.0.0.1:PORT.  For each way, in one run:
  1. GET /big?n=N: the download's time, best of 3, through the tunnel (the
     client trusts SERVER_CA) and through the interception (TASK_CA);
  2. new connections per second, one after another: CONNECT, TLS, one GET,
     close;
  3. the proxy's memory per idle connection: IDLE connections opened (CONNECT,
     TLS, one request answered) and left idle, VmRSS before and after.
"""
import argparse
import http.client
import ssl
import sys
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


CTX = {}


def conn(pport, host, port, ca):
    """A connection through the proxy; one TLS context per CA file, made once."""
    if ca not in CTX:
        CTX[ca] = ssl.create_default_context(cafile=ca)
    c = http.client.HTTPSConnection("127.0.0.1", pport, context=CTX[ca], timeout=60)
    c.set_tunnel(host, port)
    return c


def get(c, path):
    c.request("GET", path)
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    if r.status != 200:
        sys.exit("proxy-intercept: GET %s: %d" % (path, r.status))
    return n


def download(pport, host, port, ca, nbytes):
    best = None
    for _ in range(3):
        c = conn(pport, host, port, ca)
        t0 = time.monotonic()
        got = get(c, "/big?n=%d" % nbytes)
        dt = time.monotonic() - t0
        c.close()
        if got != nbytes:
            sys.exit("proxy-intercept: got %d bytes of %d" % (got, nbytes))
        best = dt if best is None else min(best, dt)
    return best


def rate(pport, host, port, ca, seconds):
    n = 0
    t0 = time.monotonic()
    while True:
        c = conn(pport, host, port, ca)
        get(c, "/ok/x")
        c.close()
        n += 1
        dt = time.monotonic() - t0
        if dt >= seconds:
            return n / dt


def idle(pport, pid, host, port, ca, count):
    before = rss_kib(pid)
    held = []
    for _ in range(count):
        c = conn(pport, host, port, ca)
        get(c, "/ok/x")
        held.append(c)
    time.sleep(0.2)
    after = rss_kib(pid)
    for c in held:
        c.close()
    return (after - before) / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pport", type=int)
    ap.add_argument("pid", type=int)
    ap.add_argument("port", type=int)
    ap.add_argument("server_ca")
    ap.add_argument("task_ca")
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--idle", type=int, default=200)
    a = ap.parse_args()
    ways = [("tunnel", "127.0.0.1", a.server_ca), ("intercepted", "localhost", a.task_ca)]
    mib = a.bytes / (1 << 20)
    down = {}
    for name, host, ca in ways:
        down[name] = download(a.pport, host, a.port, ca, a.bytes)
        print("download %s: %.0f MiB in %.2f s, %.0f MiB/s (best of 3)"
              % (name, mib, down[name], mib / down[name]))
    print("download ratio, intercepted/tunnel: %.2f" % (down["tunnel"] / down["intercepted"]))
    for name, host, ca in ways:
        print("new %s TLS connections, one after another: %.0f per second"
              % (name, rate(a.pport, host, a.port, ca, a.seconds)))
    for name, host, ca in ways:
        print("proxy memory per idle %s connection: %.1f KiB (%d open)"
              % (name, idle(a.pport, a.pid, host, a.port, ca, a.idle), a.idle))


if __name__ == "__main__":
    main()
