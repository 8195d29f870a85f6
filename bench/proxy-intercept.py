#!/usr/bin/python3
"""The proxy's memory per idle connection, tunnelled and intercepted; run by
bench/proxy (which measures the downloads and the connection rates with
build/test-tls-load).

proxy-intercept.py PROXY_PORT PID PORT SERVER_CA TASK_CA --idle N

PORT is a loopback HTTPS service on 127.0.0.1 that the proxy intercepts when
named as localhost:PORT (a rule of --secrets-fd) and tunnels when named as
127.0.0.1:PORT.  For each way: IDLE connections opened (CONNECT, TLS, one
request answered) and left idle, the proxy's VmRSS before and after.
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
    ap.add_argument("--idle", type=int, default=200)
    a = ap.parse_args()
    ways = [("tunnel", "127.0.0.1", a.server_ca), ("intercepted", "localhost", a.task_ca)]
    for name, host, ca in ways:
        print("proxy memory per idle %s connection: %.1f KiB (%d open)"
              % (name, idle(a.pport, a.pid, host, a.port, ca, a.idle), a.idle))


if __name__ == "__main__":
    main()
