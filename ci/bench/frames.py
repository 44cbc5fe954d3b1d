"""Frames for the benchmarks' pcaps: IPv4 with its checksum, UDP, a pcap file."""
import struct


def csum(b):
    """The Internet checksum of b (even length)."""
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def ipv4(src, dst, proto, payload, ident, ttl=64):
    """An IPv4 packet (no options) from src to dst (4 bytes each)."""
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0, ttl, proto, 0, src, dst))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    return bytes(ip) + payload


def udp(src, dst, sport, dport, data):
    """A UDP datagram with its checksum (src, dst: 4 bytes each)."""
    h = struct.pack("!HHHH", sport, dport, 8 + len(data), 0)
    pad = b"\0" if len(data) % 2 else b""
    pseudo = src + dst + struct.pack("!BBH", 0, 17, 8 + len(data))
    c = csum(pseudo + h + data + pad) or 0xffff
    return struct.pack("!HHHH", sport, dport, 8 + len(data), c) + data


def write_pcap(path, frames):
    """frames into a pcap file (Ethernet, microsecond timestamps)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, p in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(p), len(p)) + p)
