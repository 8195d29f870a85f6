#!/usr/bin/python3
"""Many tunnels through aibox-proxy at once, for t/3004 and bench/proxy.

proxy-load.py PROXY_PORT N [--rounds R] [--size BYTES] [--staller TIMEOUT_S] [--pid PID]
              [--echo-port PORT]

Starts an echo server on 127.0.0.1, opens N CONNECT tunnels through the proxy
to it and holds them all open, then sends R messages of BYTES on every tunnel
at once and checks each echo.  With --staller, one more client sends half a
request head and stops: it must be dropped after about TIMEOUT_S while the
tunnels go on working (one more round after the drop).  With --pid, prints the
proxy's VmHWM and VmRSS while all tunnels are open.  Prints one result per line
and exits 0 only if everything held.  With --echo-only it runs only the echo
server (printing "echo port PORT"), and --echo-elsewhere uses that one, so
that each process holds one end of the N tunnels (bench/load: 10,000).
"""
import argparse
import asyncio
import os
import sys
import time


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--staller", type=float)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--idle", type=float,
                    help="then leave the tunnels idle this long, count the proxy's "
                         "pipes before and after, and use them once more")
    ap.add_argument("--echo-port", type=int, default=0)
    ap.add_argument("--echo-elsewhere", action="store_true",
                    help="the echo server on --echo-port runs in another process "
                         "(proxy-load.py --echo-only), so this one holds one end of each tunnel")
    ap.add_argument("--read-timeout", type=float, default=30,
                    help="seconds each echo may take (all tunnels are used at once)")
    ap.add_argument("--echo-only", action="store_true",
                    help="only run the echo server on --echo-port, until killed")
    ap.add_argument("--http10", action="store_true",
                    help="accept an HTTP/1.0 200 to CONNECT (tinyproxy's, in bench/proxy)")
    a = ap.parse_args()

    active = 0
    peak = 0
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)

    async def echo(reader, writer):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            active -= 1
            writer.close()

    server = None
    eport = a.echo_port
    if not a.echo_elsewhere:
        server = await asyncio.start_server(echo, "127.0.0.1", a.echo_port, backlog=4096)
        eport = server.sockets[0].getsockname()[1]
    if a.echo_only:
        print("echo port %d" % eport, flush=True)
        await server.serve_forever()

    async def open_tunnel():
        r, w = await asyncio.open_connection("127.0.0.1", a.port)
        w.write(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (eport, eport))
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 30)
        if not head.startswith(b"HTTP/1.1 200 ") and not (
                a.http10 and head.startswith(b"HTTP/1.0 200 ")):
            raise RuntimeError("CONNECT answered %r" % head[:80])
        return r, w

    t0 = time.time()
    sem = asyncio.Semaphore(200)

    async def open_limited():
        async with sem:
            return await open_tunnel()

    tunnels = await asyncio.gather(*(open_limited() for _ in range(a.n)))
    print("opened %d tunnels in %.2fs" % (len(tunnels), time.time() - t0))

    async def use(i, r, w, rnd):
        tag = b"%d/%d:" % (i, rnd)
        msg = (tag * (a.size // len(tag) + 1))[:a.size]
        w.write(msg)
        await w.drain()
        got = await asyncio.wait_for(r.readexactly(len(msg)), a.read_timeout)
        if got != msg:
            raise RuntimeError("tunnel %d got the wrong bytes" % i)

    async def round_all(rnd):
        await asyncio.gather(*(use(i, r, w, rnd) for i, (r, w) in enumerate(tunnels)))

    staller = None
    if a.staller is not None:
        sr, sw = await asyncio.open_connection("127.0.0.1", a.port)
        sw.write(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0" % eport)
        await sw.drain()
        ts = time.time()

        async def watch():
            data = await asyncio.wait_for(sr.read(100), a.staller + 30)
            return data, time.time() - ts

        staller = (asyncio.ensure_future(watch()), sw)

    t0 = time.time()
    for rnd in range(a.rounds):
        await round_all(rnd)
    dt = time.time() - t0
    print("echoed %d rounds on %d tunnels in %.2fs" % (a.rounds, len(tunnels), dt))
    if server:
        print("open at once: %d" % peak)
    if a.pid:
        with open("/proc/%d/status" % a.pid) as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    print(line.strip())

    def pipes():
        fd = "/proc/%d/fd" % a.pid
        return sum(1 for n in os.listdir(fd) if os.readlink(os.path.join(fd, n)).startswith("pipe:"))

    if a.idle is not None:
        print("proxy pipes after the rounds: %d" % pipes())
        await asyncio.sleep(a.idle)
        print("proxy pipes after %gs idle: %d" % (a.idle, pipes()))
        await round_all(a.rounds)
        print("tunnels still work after the idle time: yes")

    if staller:
        task, sw = staller
        data, waited = await task
        print("staller dropped: %s after %.1fs" % ("yes" if data == b"" else repr(data), waited))
        # the others go on
        await round_all(a.rounds)
        print("tunnels still work after the drop: yes")
        sw.close()

    for r, w in tunnels:
        w.close()
    for _ in range(100):
        if not active:
            break
        await asyncio.sleep(0.05)
    if server:
        server.close()
    return 0


sys.exit(asyncio.run(main()))
