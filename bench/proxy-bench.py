#!/usr/bin/python3
"""Throughput and connection rate of aibox-proxy; run by bench/proxy.

proxy-bench.py PROXY_PORT SINK_PORT [--bytes N] [--conns N]

A sink process on 127.0.0.1:SINK_PORT reads and drops what it gets and says
how many bytes it got.  The same sender moves N bytes to it directly, then
through a CONNECT tunnel of the proxy, in one run; the time is taken from the
first byte sent to the sink's acknowledgement of the last one.  Then it opens
and closes tunnels one after another for a few seconds and counts them.
"""
import argparse
import multiprocessing
import socket
import time

CHUNK = 1 << 20


def sink(port, ready):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1024)
    ready.set()
    buf = bytearray(CHUNK)
    while True:
        c, _ = ls.accept()
        total = 0
        want = None
        # 8-byte header: how many bytes follow
        hdr = b""
        while len(hdr) < 8:
            b = c.recv(8 - len(hdr))
            if not b:
                break
            hdr += b
        if len(hdr) < 8:
            c.close()
            continue
        want = int.from_bytes(hdr, "big")
        while total < want:
            n = c.recv_into(buf)
            if not n:
                break
            total += n
        c.sendall(b"ok %d\n" % total)
        c.close()


def send(sock, nbytes):
    data = memoryview(bytes(CHUNK))
    t0 = time.perf_counter()
    sock.sendall(nbytes.to_bytes(8, "big"))
    left = nbytes
    while left:
        n = min(left, CHUNK)
        sock.sendall(data[:n])
        left -= n
    ack = sock.makefile("rb").readline()
    dt = time.perf_counter() - t0
    assert ack == b"ok %d\n" % nbytes, ack
    return dt


def tunnel(pport, sport):
    s = socket.create_connection(("127.0.0.1", pport))
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (sport, sport))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            raise RuntimeError("proxy closed")
        head += b
    assert head.startswith(b"HTTP/1.1 200 "), head
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pport", type=int)
    ap.add_argument("sport", type=int)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()

    ready = multiprocessing.Event()
    p = multiprocessing.Process(target=sink, args=(a.sport, ready), daemon=True)
    p.start()
    ready.wait()

    # warm up both paths, then alternate so neither gets the better minute
    send(socket.create_connection(("127.0.0.1", a.sport)), 1 << 26)
    send(tunnel(a.pport, a.sport), 1 << 26)
    direct, through = [], []
    for _ in range(3):
        direct.append(send(socket.create_connection(("127.0.0.1", a.sport)), a.bytes))
        through.append(send(tunnel(a.pport, a.sport), a.bytes))
    d, t = min(direct), min(through)
    mib = a.bytes / (1 << 20)
    print("transfer: %d MiB, best of 3" % mib)
    print("direct:  %.2f s  %.0f MiB/s" % (d, mib / d))
    print("tunnel:  %.2f s  %.0f MiB/s" % (t, mib / t))
    print("ratio:   %.2f" % (d / t))

    # connection rate: CONNECT, 200, close, one after another
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        s = tunnel(a.pport, a.sport)
        s.close()
        n += 1
    dt = time.perf_counter() - t0
    print("tunnels opened and closed one after another: %.0f per second" % (n / dt))
    p.terminate()


if __name__ == "__main__":
    main()
