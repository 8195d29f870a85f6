#!/usr/bin/python3
"""Throughput and connection rate of aibox-proxy; run by bench/proxy.

proxy-bench.py PROXY_PORT SINK_PORT [--bytes N] [--conns N]

A sink process on 127.0.0.1:SINK_PORT reads and drops what it gets and says
how many bytes it got.  The same sender moves N bytes to it directly, then
through a CONNECT tunnel of the proxy, in one run; the time is taken from the
first byte sent to the sink's acknowledgement of the last one.  The CPU time
of the sender, the sink and the proxy is read for each transfer from
/proc/PID/schedstat, which does not depend on the machine's load.  Then it opens
and closes tunnels one after another for a few seconds and counts them.
"""
import argparse
import multiprocessing
import os
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


RATE = 0  # bytes per second, 0 for no limit (--rate)


def send(sock, nbytes):
    if RATE:
        # the kernel's TCP pacing holds the sender to the rate, like a slow link
        sock.setsockopt(socket.SOL_SOCKET, 47, RATE)  # SO_MAX_PACING_RATE
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
    assert head.startswith((b"HTTP/1.1 200 ", b"HTTP/1.0 200 ")), head
    return s


def cpu_seconds(pid, threads=False):
    """CPU time of a process so far.  One thread: /proc/PID/schedstat (ns).
    threads: every thread's, ended ones included (a proxy that runs a thread
    per connection, as tinyproxy does): /proc/PID/stat's utime + stime, in
    clock ticks."""
    if not pid:
        return 0.0
    if not threads:
        try:
            with open("/proc/%d/schedstat" % pid) as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pport", type=int)
    ap.add_argument("sport", type=int)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--pid", type=int, help="the proxy, to read its CPU time")
    ap.add_argument("--runs", type=int, default=3, help="transfers of each kind")
    ap.add_argument("--rate", type=float, default=0,
                    help="hold the sender to this many MiB/s, as a link would (0: no limit)")
    a = ap.parse_args()
    global RATE
    RATE = int(a.rate * (1 << 20))

    ready = multiprocessing.Event()
    p = multiprocessing.Process(target=sink, args=(a.sport, ready), daemon=True)
    p.start()
    ready.wait()

    # warm up both paths, then alternate so neither gets the better minute
    send(socket.create_connection(("127.0.0.1", a.sport)), 1 << 26)
    send(tunnel(a.pport, a.sport), 1 << 26)
    direct, through = [], []
    # CPU seconds of (sender, sink, proxy) summed over the runs of each leg
    cpu_d, cpu_t = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]

    def leg(times, cpu, connect):
        s = connect()
        c0 = (cpu_seconds(os.getpid()), cpu_seconds(p.pid), cpu_seconds(a.pid, True))
        times.append(send(s, a.bytes))
        c1 = (cpu_seconds(os.getpid()), cpu_seconds(p.pid), cpu_seconds(a.pid, True))
        for i in range(3):
            cpu[i] += c1[i] - c0[i]
        s.close()

    for _ in range(a.runs):
        leg(direct, cpu_d, lambda: socket.create_connection(("127.0.0.1", a.sport)))
        leg(through, cpu_t, lambda: tunnel(a.pport, a.sport))
    d, t = min(direct), min(through)
    mib = a.bytes / (1 << 20)
    gib = a.bytes / (1 << 30) * a.runs
    print("transfer: %d MiB, best of %d" % (mib, a.runs))
    print("direct:  %.2f s  %.0f MiB/s" % (d, mib / d))
    print("tunnel:  %.2f s  %.0f MiB/s" % (t, mib / t))
    print("ratio:   %.2f" % (d / t))
    print("CPU s per GiB, direct: sender %.2f, sink %.2f; total %.2f"
          % (cpu_d[0] / gib, cpu_d[1] / gib, (cpu_d[0] + cpu_d[1]) / gib))
    print("CPU s per GiB, tunnel: sender %.2f, sink %.2f, proxy %.2f; total %.2f"
          % (cpu_t[0] / gib, cpu_t[1] / gib, cpu_t[2] / gib, sum(cpu_t) / gib))
    if a.pid:
        print("proxy CPU time: %.2f s per GiB through the tunnel" % (cpu_t[2] / gib))
    # What the CPU times allow, whatever the load: each process is a pipeline
    # stage, so a transfer takes at least its busiest stage's CPU time, and
    # at least the CPU time of the processes sharing a set of cores, shared
    # out over those cores.
    mine = os.sched_getaffinity(0)
    theirs = os.sched_getaffinity(a.pid) if a.pid else mine
    if mine & theirs:
        ncpu = len(mine | theirs)
        lb_d = max(sum(cpu_d) / ncpu, max(cpu_d))
        lb_t = max(sum(cpu_t) / ncpu, max(cpu_t))
        where = "%d cores shared" % ncpu
    else:
        lb_d = max((cpu_d[0] + cpu_d[1]) / len(mine), max(cpu_d))
        lb_t = max((cpu_t[0] + cpu_t[1]) / len(mine), cpu_t[2] / len(theirs), max(cpu_t))
        where = "%d core(s) for sender and sink, %d for the proxy" % (len(mine), len(theirs))
    lb_d, lb_t = lb_d / gib, lb_t / gib
    if not RATE:
        print("ratio the CPU times allow on %s: %.2f (direct >= %.2f s/GiB, tunnel >= %.2f s/GiB)"
              % (where, lb_d / lb_t, lb_d, lb_t))
    with open("/proc/loadavg") as f:
        print("load average during the run: %s" % " ".join(f.read().split()[:3]))

    if a.seconds > 0:
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
