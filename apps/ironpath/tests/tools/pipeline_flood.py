#!/usr/bin/env python3
"""Pipelining trickle readers from one address (inside the test's namespace).

    pipeline_flood.py SRC_IP DST_IP CONNS SECS [READ_EVERY [UNTIL_RESET_SECS]]

Keeps CONNS kernel connections from SRC_IP to DST_IP:80 open for SECS seconds. Each
has a small receive buffer, writes pipelined GET requests (mostly small answers: a
404 for /missing, the empty object /empty; now and then /1m, a cached 1 MiB file)
as fast as the socket takes them, and reads 2 KiB of the answers every READ_EVERY
seconds (2: below the server's send_min_rate; 0.5: above it, progress enough):
each answer costs the server heap until it is acknowledged, its receive buffers
fill with requests it has not parsed, and the send timeout sees a little progress
now and then. A connection the server closes or resets is opened again. With
UNTIL_RESET_SECS, the readers go on past SECS until the server has closed or reset
one of their connections, for at most UNTIL_RESET_SECS in all (a loaded machine
connects them late, and the send timeout needs whole periods to bite). Prints
"opened N closed_by_peer M read R sent S".
"""
import errno
import resource
import select
import socket
import sys
import time

REQUESTS = (b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n" + b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\n") * 128 + (
    b"GET /1m HTTP/1.1\r\nHost: x\r\n\r\n"
)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    conns, secs = int(sys.argv[3]), float(sys.argv[4])
    every = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
    until_reset = float(sys.argv[6]) if len(sys.argv) > 6 else secs
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, conns + 100)), hard))
    start = time.time()
    end = start + secs
    opened = closed = read = sent = 0
    socks = {}  # socket -> [bytes of REQUESTS written, time of the next read]

    def open_one():
        nonlocal opened
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        s.bind((src, 0))
        try:
            s.connect((dst, 80))
        except BlockingIOError:
            pass
        socks[s] = [0, time.time() + every]
        opened += 1

    for _ in range(conns):
        open_one()
    while time.time() < end or (closed == 0 and time.time() < start + until_reset):
        _, writable, _ = select.select([], list(socks), [], 0.05)
        for s in writable:
            c = socks.get(s)
            if c is None:
                continue
            try:
                n = s.send(REQUESTS[c[0] :] or REQUESTS)
                c[0] = (c[0] + n) % len(REQUESTS)
                sent += n
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    continue  # still connecting
                closed += 1
                del socks[s]
                s.close()
                open_one()
        now = time.time()
        for s, c in list(socks.items()):
            if now < c[1]:
                continue
            c[1] = now + every
            try:
                got = s.recv(2048)
                if not got:
                    raise ConnectionResetError
                read += len(got)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    continue  # still connecting
                closed += 1
                del socks[s]
                s.close()
                open_one()
    for s in socks:
        s.close()
    print("opened %d closed_by_peer %d read %d sent %d" % (opened, closed, read, sent))


if __name__ == "__main__":
    main()
