#!/usr/bin/env python3
"""A hand-written hostile memif peer for net_memif's tests.

    memif_peer.py client SOCKET ID SCENARIO   (against an ironpath memif server)
    memif_peer.py server SOCKET SCENARIO      (for an ironpath memif client)

SOCKET is a path, or @name for the abstract namespace. Scenarios:

client (the server runs testpmd `io`, so packets come back on the S2C ring):
  big-region     ADD_REGION larger than its memfd           -> refused, reason printed
  no-fd          ADD_REGION without a descriptor            -> refused
  unsealable     a region that cannot be sealed (the server's default) -> refused
  seal-locked    a region sealed with F_SEAL_SEAL only (it may shrink, and no seal can be
                 added)                                      -> refused
  truncate       a valid connection; truncating the region then fails (the server
                 sealed it), and traffic goes on
  pipe-kick      a full blocking pipe as a ring's interrupt fd -> refused
  spam           writes its C2S ring's eventfd for 1 s with nothing in the ring while the
                 server sleeps (rx mode adaptive); then packets must still be echoed
  kick           the S2C ring asks for interrupts: after packets come back, its eventfd
                 has been signalled
  saturated-kick the S2C ring asks for interrupts and its eventfd is blocking with its
                 counter at the maximum: packets keep coming on S2C for 3 s (the server
                 never writes it from its lcore), and the counter was signalled
  no-secret      INIT without a secret (server with secret=pw) -> refused
  wrong-secret   INIT with a wrong secret                    -> refused
  not-owner      (run as another user) no HELLO: the connection is refused at once
  ring-outside   a ring past the end of its region          -> refused
  bad-cookie     a ring without the cookie, then CONNECT    -> refused
  short          a 64-byte message                          -> refused
  unknown        message type 99                            -> refused
  stall          6 connections that never send INIT         -> 4 wait, 2 turned away, all closed
  data           a valid connection, then descriptors outside the region, too long,
                 in a region that does not exist, a broken chain; posted S2C buffers
                 outside the region; a head index past the ring; valid traffic in
                 between must keep coming back intact.
server (the client runs testpmd `rxonly`):
  data           a valid connection, then S2C descriptors longer than a buffer, a tail
                 past the buffers posted, then 5 good packets; then DISCONNECT and,
                 on the client's reconnection, a HELLO of an unknown version.
  squat          (run as another user) HELLO to whoever connects: the client must
                 leave without INIT.

As a conforming peer (DPDK, libmemif, VPP) does, after moving its index on a ring it
writes that ring's eventfd unless the receiver set MASK_INT (a receiver that sleeps
clears it).

Prints one line per check ("ok ...") and exits 0 when every expectation held.
"""
import fcntl
import mmap
import os
import socket
import struct
import sys
import time

VERSION = 0x0200
COOKIE = 0x3E31F20
ACK, HELLO, INIT, ADD_REGION, ADD_RING, CONNECT, CONNECTED, DISCONNECT = range(1, 9)
LOG2 = 8
SIZE = 1 << LOG2
BSIZE = 2048
RING = 128 + 16 * SIZE
MASK_INT = 1  # ring flag: the receiver polls, do not signal its eventfd


def msg(t, body=b""):
    b = struct.pack("<H", t) + body
    return b + bytes(128 - len(b))


def parse(b):
    if len(b) == 0:
        return ("eof", "")
    t = struct.unpack_from("<H", b)[0]
    if t == DISCONNECT:
        return ("disconnect", b[6:102].split(b"\0")[0].decode(errors="replace"))
    return (t, b)


def addr(name):
    return "\0" + name[1:] if name.startswith("@") else name


def connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(addr(name))
    return s


def expect(s, want):
    t, b = parse(s.recv(256))
    if t != want:
        raise SystemExit(f"expected message {want}, got {t} {b!r}")
    return b


def refused(s):
    """Read until the server's DISCONNECT; return its reason."""
    while True:
        try:
            t, b = parse(s.recv(256))
        except (ConnectionResetError, socket.timeout):
            return "<closed>"
        if t == "disconnect":
            return b
        if t == "eof":
            return "<closed>"


class Region:
    """Region 0: C2S ring, S2C ring, then SIZE buffers for each (our layout)."""

    def __init__(self, declared=None, real=None, sealable=True):
        self.size = 2 * RING + 2 * SIZE * BSIZE
        self.fd = os.memfd_create("hostile", os.MFD_ALLOW_SEALING if sealable else 0)
        os.ftruncate(self.fd, real or self.size)
        self.mem = mmap.mmap(self.fd, real or self.size)
        self.declared = declared or self.size
        self.ev = {}  # ring offset -> its interrupt eventfd
        for r in (0, RING):
            struct.pack_into("<IHH", self.mem, r, COOKIE, 0, 0)
            struct.pack_into("<H", self.mem, r + 64, 0)

    def buf(self, c2s, slot):
        return 2 * RING + ((0 if c2s else SIZE) + slot % SIZE) * BSIZE

    def desc(self, ring, slot, flags, region, length, offset):
        struct.pack_into("<HHIII", self.mem, ring + 128 + 16 * (slot % SIZE), flags, region, length, offset, 0)

    def read_desc(self, ring, slot):
        return struct.unpack_from("<HHIII", self.mem, ring + 128 + 16 * (slot % SIZE))

    def head(self, ring, v=None):
        if v is not None:
            struct.pack_into("<H", self.mem, ring + 6, v & 0xFFFF)
        return struct.unpack_from("<H", self.mem, ring + 6)[0]

    def tail(self, ring, v=None):
        if v is not None:
            struct.pack_into("<H", self.mem, ring + 64, v & 0xFFFF)
        return struct.unpack_from("<H", self.mem, ring + 64)[0]

    def kick(self, ring):
        """After moving our index, as a conforming peer does: signal the ring's
        eventfd unless the receiver masked interrupts (it sleeps otherwise)."""
        kick_if_unmasked(self.mem, ring, self.ev.get(ring))


def kick_if_unmasked(mem, ring, ev):
    flags = struct.unpack_from("<H", mem, ring + 4)[0]
    if ev is not None and not flags & MASK_INT:
        os.write(ev, struct.pack("<Q", 1))


def handshake(s, ident, region, rings=((1, 0, 0), (0, 0, RING)), send_fd=True, connect_msg=True, secret=b"", kick=None):
    """Walk the handshake; None when connected, else the server's reason. `kick`
    makes the interrupt fd of each ring (default: a new eventfd)."""
    expect(s, HELLO)
    s.send(msg(INIT, struct.pack("<HIB", VERSION, ident, 0) + secret.ljust(24, b"\0") + b"hostile"))
    t, b = parse(s.recv(256))
    if t != ACK:
        return b
    body = msg(ADD_REGION, struct.pack("<HQ", 0, region.declared))
    if send_fd:
        socket.send_fds(s, [body], [region.fd])
    else:
        s.send(body)
    t, b = parse(s.recv(256))
    if t != ACK:
        return b
    for flags, index, off in rings:
        ev = kick(flags) if kick else os.eventfd(0)
        region.ev[off] = ev
        socket.send_fds(s, [msg(ADD_RING, struct.pack("<HHHIBH", flags, index, 0, off, LOG2, 0))], [ev])
        t, b = parse(s.recv(256))
        if t != ACK:
            return b
    if connect_msg:
        s.send(msg(CONNECT, b"hostile0"))
        t, b = parse(s.recv(256))
        if t != CONNECTED:
            return b
    return None


def frame(i):
    return bytes([0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xB5]) + b"IRONPATH-MEMIF-%06d" % i + bytes(24)


def wait(cond, secs=3.0):
    t = time.time()
    while time.time() - t < secs:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


def client(name, ident, scenario):
    if scenario == "stall":
        socks = [connect(name) for _ in range(6)]
        reasons = [refused(s) for s in socks]
        away = sum(r == "Too many connections waiting" for r in reasons)
        late = sum(r == "Handshake timeout" for r in reasons)
        print(f"reasons {reasons}")
        assert away == 2 and late == 4, reasons
        print("ok stall: 4 timed out, 2 turned away")
        return
    if scenario == "not-owner":
        try:
            s = connect(name)
        except PermissionError:
            print("ok not-owner: the socket file refused us (EACCES)")
            return
        t, b = parse(s.recv(256))
        assert t != HELLO, "a HELLO to another user"
        print(f"ok not-owner: no HELLO, refused with {b!r}")
        return
    s = connect(name)
    if scenario == "short":
        expect(s, HELLO)
        s.send(bytes(64))
        r = refused(s)
        assert r == "Invalid message size", r
    elif scenario == "unknown":
        expect(s, HELLO)
        s.send(msg(99))
        r = refused(s)
        assert r == "Unknown message type", r
    elif scenario == "big-region":
        r = handshake(s, ident, Region(declared=1 << 30, real=1 << 20))
        assert r == "Region larger than its file", r
    elif scenario == "unsealable":
        r = handshake(s, ident, Region(sealable=False))
        assert r == "Region not sealed against shrinking", r
    elif scenario == "seal-locked":
        reg = Region()
        fcntl.fcntl(reg.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL)
        r = handshake(s, ident, reg)
        assert r == "Region not sealed against shrinking", r
    elif scenario == "truncate":
        truncate_client(s, ident)
        return
    elif scenario == "pipe-kick":
        rd, wr = os.pipe()
        os.set_blocking(wr, False)
        try:
            while True:
                os.write(wr, bytes(65536))
        except BlockingIOError:
            pass
        os.set_blocking(wr, True)
        r = handshake(s, ident, Region(), kick=lambda flags: wr)
        assert r == "Interrupt fd not an eventfd", r
    elif scenario in ("kick", "saturated-kick"):
        kick_client(s, ident, scenario == "saturated-kick")
        return
    elif scenario == "spam":
        spam_client(s, ident)
        return
    elif scenario == "no-secret":
        r = handshake(s, ident, Region())
        assert r == "Secret required", r
    elif scenario == "wrong-secret":
        r = handshake(s, ident, Region(), secret=b"wrong")
        assert r == "Incorrect secret", r
    elif scenario == "no-fd":
        r = handshake(s, ident, Region(), send_fd=False)
        assert r == "Missing region fd", r
    elif scenario == "ring-outside":
        reg = Region()
        r = handshake(s, ident, reg, rings=((1, 0, reg.size - 64),))
        assert r == "Ring outside its region", r
    elif scenario == "bad-cookie":
        reg = Region()
        struct.pack_into("<I", reg.mem, RING, 0xDEAD)
        r = handshake(s, ident, reg)
        assert r == "Wrong ring cookie", r
    elif scenario == "data":
        data_client(s, ident)
        return
    else:
        raise SystemExit(f"no scenario {scenario}")
    print(f"ok {scenario}: refused with \"{r}\"")


class Echo:
    """Both rings of a connected Region: send frames on C2S, take what comes back on
    S2C and post its buffer again."""

    def __init__(self, reg):
        self.reg, self.c2s, self.s2c = reg, 0, RING
        for i in range(SIZE):
            reg.desc(self.s2c, i, 0, 0, BSIZE, reg.buf(False, i))
        reg.head(self.s2c, SIZE)
        self.head, self.rx, self.posted = 0, 0, SIZE

    def send(self, frames):
        reg = self.reg
        for f in frames:
            off = reg.buf(True, self.head)
            reg.mem[off : off + len(f)] = f
            reg.desc(self.c2s, self.head, 0, 0, len(f), off)
            self.head += 1
        reg.head(self.c2s, self.head)
        reg.kick(self.c2s)
        assert wait(lambda: reg.tail(self.c2s) == self.head & 0xFFFF), "the server did not consume"

    def take(self):
        """Frames received so far (their buffers posted again)."""
        reg, got = self.reg, []
        while self.rx != reg.tail(self.s2c):
            _, _, length, _, _ = reg.read_desc(self.s2c, self.rx)
            off = reg.buf(False, self.rx)
            got.append(bytes(reg.mem[off : off + length]))
            reg.desc(self.s2c, self.posted, 0, 0, BSIZE, reg.buf(False, self.posted))
            self.posted += 1
            self.rx = (self.rx + 1) & 0xFFFF
        reg.head(self.s2c, self.posted)
        return got


def truncate_client(s, ident):
    reg = Region()
    r = handshake(s, ident, reg)
    assert r is None, r
    try:
        os.ftruncate(reg.fd, 4096)
        raise SystemExit("the region could be truncated: the server did not seal it")
    except PermissionError:
        pass
    assert os.fstat(reg.fd).st_size == reg.size
    print("ok the region cannot be truncated (sealed against shrinking)")
    e = Echo(reg)
    e.send([frame(i) for i in range(16)])
    assert wait(lambda: e.reg.tail(e.s2c) == 16), "no echo after the truncation attempt"
    assert e.take() == [frame(i) for i in range(16)]
    print("ok traffic goes on")
    s.send(msg(DISCONNECT, struct.pack("<I", 0) + b"hostile done"))
    s.close()


def kick_client(s, ident, saturated):
    """The S2C ring asks for interrupts (its flags stay 0)."""
    made = []

    def kick(flags):
        ev = os.eventfd(0)  # blocking
        if saturated and flags == 0:
            os.write(ev, struct.pack("<Q", 0xFFFFFFFFFFFFFFFE))
        made.append((flags, ev))
        return ev

    reg = Region()
    r = handshake(s, ident, reg, kick=kick)
    assert r is None, r
    s2c_ev = [ev for flags, ev in made if flags == 0][0]
    e = Echo(reg)
    got, t = 0, time.time()
    # The server forwards what we send back on S2C (testpmd io), or another port's
    # traffic: either way packets keep coming while its interrupts are wanted.
    while time.time() - t < (3.0 if saturated else 0.5):
        if (e.head - reg.tail(e.c2s)) & 0xFFFF == 0:
            n = min(32, (e.posted - e.rx) & 0xFFFF)
            e.send([frame(e.head + i) for i in range(n)])
        got += len(e.take())
        time.sleep(0.001)
    assert got >= (1000 if saturated else 16), f"only {got} packets came on S2C"
    os.set_blocking(s2c_ev, False)
    count = struct.unpack("<Q", os.read(s2c_ev, 8))[0]
    if saturated:
        # The counter stops at its maximum: signalled, never blocked on.
        assert count == 0xFFFFFFFFFFFFFFFF, hex(count)
        print(f"ok {got} packets came on S2C while its eventfd was saturated, and it was signalled")
    else:
        assert count >= 1, count
        print(f"ok {got} packets came back and the eventfd was signalled ({count})")
    s.send(msg(DISCONNECT, struct.pack("<I", 0) + b"hostile done"))
    s.close()


def spam_client(s, ident):
    """Write the C2S ring's eventfd for a second with nothing in the ring while the
    server sleeps; then traffic must still be woken for."""
    reg = Region()
    r = handshake(s, ident, reg)
    assert r is None, r
    e = Echo(reg)
    assert wait(lambda: not struct.unpack_from("<H", reg.mem, e.c2s + 4)[0] & MASK_INT), "the server never slept"
    ev, n, t = reg.ev[e.c2s], 0, time.time()
    while time.time() - t < 1.0:
        os.write(ev, struct.pack("<Q", 1))
        n += 1
    e.send([frame(i) for i in range(8)])
    assert wait(lambda: reg.tail(e.s2c) == 8), "no echo after the spam"
    assert e.take() == [frame(i) for i in range(8)]
    print(f"ok {n} signals with nothing in the ring, then traffic echoed")
    s.send(msg(DISCONNECT, struct.pack("<I", 0) + b"hostile done"))
    s.close()


def data_client(s, ident):
    reg = Region()
    r = handshake(s, ident, reg)
    assert r is None, r
    c2s, s2c = 0, RING
    # Post every S2C buffer, then send packets and read them back.
    for i in range(SIZE):
        reg.desc(s2c, i, 0, 0, BSIZE, reg.buf(False, i))
    reg.head(s2c, SIZE)
    state = {"head": 0, "rx": 0, "posted": SIZE}

    def send(frames):
        for f in frames:
            h = state["head"]
            if isinstance(f, tuple):
                reg.desc(c2s, h, *f)
            else:
                off = reg.buf(True, h)
                reg.mem[off : off + len(f)] = f
                reg.desc(c2s, h, 0, 0, len(f), off)
            state["head"] = h + 1
        reg.head(c2s, state["head"])
        reg.kick(c2s)
        assert wait(lambda: reg.tail(c2s) == state["head"] & 0xFFFF), "the server did not consume"

    def received(n):
        assert wait(lambda: (reg.tail(s2c) - state["rx"]) & 0xFFFF >= n), f"fewer than {n} came back"
        got = []
        while state["rx"] != reg.tail(s2c):
            _, _, length, off, _ = reg.read_desc(s2c, state["rx"])
            got.append(bytes(reg.mem[reg.buf(False, state["rx"]) : reg.buf(False, state["rx"]) + length]) if length else b"")
            # Re-post the slot (the right buffer again).
            reg.desc(s2c, state["posted"], 0, 0, BSIZE, reg.buf(False, state["posted"]))
            state["posted"] += 1
            state["rx"] = (state["rx"] + 1) & 0xFFFF
        reg.head(s2c, state["posted"])
        return got

    send([frame(i) for i in range(64)])
    got = received(64)
    assert got == [frame(i) for i in range(64)], "echo differs"
    print("ok 64 packets echoed intact")
    bad = [(0, 0, 100, 0xFFFFF000)] * 10 + [(0, 0, 0x7FFFFFFF, 0)] * 10 + [(0, 9, 60, 0)] * 5
    bad += [(1, 0, 60, reg.buf(True, 0)), (0, 0, 100, 0xFFFFFFF0)]
    send(bad)
    print("ok 26 bad packets (27 descriptors) consumed")
    send([frame(100 + i) for i in range(10)])
    got = received(10)
    assert got == [frame(100 + i) for i in range(10)], "echo after bad descriptors differs"
    print("ok traffic flows after bad descriptors")
    # Posted S2C buffers rewritten to point outside the region.
    for i in range(10):
        reg.desc(s2c, state["rx"] + i, 0, 0, BSIZE, 0xFFFFFF00)
    send([frame(200 + i) for i in range(20)])
    got = received(20)
    assert got[:10] == [b""] * 10 and got[10:] == [frame(210 + i) for i in range(10)], got
    print("ok S2C buffers outside the region given back empty, the rest delivered")
    # A head index past the ring: the server must skip, not read.
    reg.head(c2s, state["head"] + 3000)
    reg.kick(c2s)
    time.sleep(0.3)
    assert reg.tail(c2s) == state["head"] & 0xFFFF, "the server consumed past the ring"
    reg.head(c2s, state["head"])
    send([frame(300 + i) for i in range(5)])
    assert received(5) == [frame(300 + i) for i in range(5)]
    print("ok a head index past the ring is ignored, traffic resumes")
    s.send(msg(DISCONNECT, struct.pack("<I", 0) + b"hostile done"))
    s.close()


def server(name, scenario):
    assert scenario in ("data", "squat")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if not name.startswith("@") and os.path.exists(name):
        os.unlink(name)
    ls.bind(addr(name))
    ls.listen(1)
    ls.settimeout(10)
    s, _ = ls.accept()
    s.settimeout(5)
    hello = msg(HELLO, b"hostile".ljust(32, b"\0") + struct.pack("<HHHHHB", VERSION, VERSION, 0, 0, 0, LOG2))
    if scenario == "squat":
        try:
            s.send(hello)
            t, b = parse(s.recv(256))
        except (BrokenPipeError, ConnectionResetError):
            t, b = "eof", ""
        assert t in ("eof", "disconnect"), f"the client answered a stranger's HELLO: {t}"
        print(f"ok the client left without INIT ({b or 'closed'})")
        return
    s.send(hello)
    region = None
    rings = {}
    evs = {}
    while True:
        b, fds, _, _ = socket.recv_fds(s, 256, 4)
        t, _ = parse(b)
        if t == INIT:
            s.send(msg(ACK))
        elif t == ADD_REGION:
            size = struct.unpack_from("<Q", b, 4)[0]
            region = mmap.mmap(fds[0], size)
            s.send(msg(ACK))
        elif t == ADD_RING:
            flags, index, reg_i, off, log2 = struct.unpack_from("<HHHIB", b, 2)
            rings[flags & 1] = (off, log2)
            evs[flags & 1] = fds[0] if fds else None
            s.send(msg(ACK))
        elif t == CONNECT:
            break
        else:
            raise SystemExit(f"unexpected {t}")
    s2c, log2 = rings[0]
    for r, _ in rings.values():
        struct.pack_into("<HH", region, r + 6, 0, 0)
        struct.pack_into("<H", region, r + 64, 0)
    s.send(msg(CONNECTED, b"hostile-server"))
    size = 1 << log2
    # The client posts its buffers: wait for them.
    assert wait(lambda: struct.unpack_from("<H", region, s2c + 6)[0] == size), "no buffers posted"

    def put(slot, flags, length, data=b""):
        d = s2c + 128 + 16 * (slot % size)
        _, reg_i, room, off, _ = struct.unpack_from("<HHIII", region, d)
        region[off : off + len(data)] = data
        struct.pack_into("<HHIII", region, d, flags, reg_i, length, off, 0)

    # 5 descriptors longer than the client's buffers, then 5 good packets.
    for i in range(5):
        put(i, 0, 100000)
    for i in range(5):
        f = frame(i)
        put(5 + i, 0, len(f), f)
    struct.pack_into("<H", region, s2c + 64, 10)
    kick_if_unmasked(region, s2c, evs[0])
    time.sleep(0.5)
    # A tail past every posted buffer.
    struct.pack_into("<H", region, s2c + 64, 10 + 5000)
    kick_if_unmasked(region, s2c, evs[0])
    time.sleep(0.5)
    struct.pack_into("<H", region, s2c + 64, 10)
    print("ok hostile data written")
    s.send(msg(DISCONNECT, struct.pack("<I", 0) + b"hostile server going"))
    s.close()
    # The client comes back: offer it a version it cannot speak.
    s, _ = ls.accept()
    s.settimeout(5)
    s.send(msg(HELLO, b"hostile".ljust(32, b"\0") + struct.pack("<HHHHHB", 0x0300, 0x0300, 0, 0, 0, LOG2)))
    r = refused(s)
    assert r == "Incompatible memif version", r
    print(f"ok the client refused HELLO 3.0: \"{r}\"")


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        server(sys.argv[2], sys.argv[3])
