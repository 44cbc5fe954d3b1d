#!/usr/bin/env python3
"""Crafted frames for the root tests: sent as they are, on a raw packet socket.

    frames.py IFACE short-nd DST_MAC SRC_MAC SRC6 DST6
        IPv6 neighbour solicitation and advertisement with a 4-byte ICMPv6 body
        (58-byte frames), and every cut of a whole solicitation, to DST6.
    frames.py IFACE udp6-ext DST_MAC SRC_MAC SRC6 DST6 PORT
        UDP to PORT behind a hop-by-hop header, a destination-options header and an
        atomic fragment header, and once plain.
    frames.py IFACE scan6 PREFIX64 SECONDS RATE
        UDP datagrams to random addresses of the /64 PREFIX64 (as fd00:55::) through
        the kernel's routing (datagram socket), RATE a second for SECONDS.
"""
import os
import random
import socket
import struct
import sys
import time


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ip6(src, dst, nh, hop, payload, plen=None):
    plen = len(payload) if plen is None else plen
    return (struct.pack("!IHBB", 6 << 28, plen, nh, hop) + socket.inet_pton(socket.AF_INET6, src)
            + socket.inet_pton(socket.AF_INET6, dst) + payload)


def l4_sum(src, dst, proto, seg):
    pseudo = (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
              + struct.pack("!IxxxB", len(seg), proto))
    return csum(pseudo + seg)


def send(iface, frames):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    for f in frames:
        s.send(f)
        time.sleep(0.001)


def short_nd(iface, dst_mac, src_mac, src, dst):
    eth = mac(dst_mac) + mac(src_mac) + b"\x86\xdd"
    frames = [eth + ip6(src, dst, 58, 255, bytes([t, 0, 0, 0])) for t in (135, 136)]
    # A whole solicitation for DST (with our link-layer address), then every cut of it
    # with the payload length kept (the frame shorter than its header says) and cut.
    body = bytes([135, 0, 0, 0, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, dst) + b"\x01\x01" + mac(src_mac)
    body = body[:2] + struct.pack("!H", l4_sum(src, dst, 58, body)) + body[4:]
    whole = ip6(src, dst, 58, 255, body)
    for n in range(40, len(whole)):
        frames.append(eth + whole[:n])
        cut = bytearray(whole[:n])
        struct.pack_into("!H", cut, 4, n - 40)
        frames.append(eth + bytes(cut))
    send(iface, frames)
    print(len(frames))


def udp6_ext(iface, dst_mac, src_mac, src, dst, port):
    eth = mac(dst_mac) + mac(src_mac) + b"\x86\xdd"
    udp = struct.pack("!HHHH", 40000, port, 8 + 4, 0) + b"ping"
    udp = udp[:6] + struct.pack("!H", l4_sum(src, dst, 17, udp)) + udp[8:]
    hbh = bytes([17, 0, 1, 4, 0, 0, 0, 0])  # next: UDP; PadN
    dopts = bytes([17, 0, 1, 4, 0, 0, 0, 0])
    frag = bytes([17, 0, 0, 0]) + struct.pack("!I", random.getrandbits(32))  # offset 0, M=0
    frames = [
        eth + ip6(src, dst, 17, 64, udp),
        eth + ip6(src, dst, 0, 64, hbh + udp),
        eth + ip6(src, dst, 60, 64, dopts + udp),
        eth + ip6(src, dst, 44, 64, frag + udp),
    ]
    send(iface, frames)
    print(len(frames))


def scan6(prefix, seconds, rate):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setblocking(False)
    base = socket.inet_pton(socket.AF_INET6, prefix)[:8]
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        for _ in range(max(1, rate // 100)):
            addr = socket.inet_ntop(socket.AF_INET6, base + os.urandom(8))
            try:
                s.sendto(b"scan", (addr, 33434))
                sent += 1
            except OSError:
                pass
        time.sleep(max(0.0, 0.01 - (time.monotonic() - t0)))
    print(sent)


def main():
    iface, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if what == "short-nd":
        short_nd(iface, *args)
    elif what == "udp6-ext":
        udp6_ext(iface, *args[:4], int(args[4]))
    elif what == "scan6":
        scan6(args[0], float(args[1]), int(args[2]))
    else:
        sys.exit("unknown: " + what)


if __name__ == "__main__":
    main()
