"""nfq_delay.py LO_MS HI_MS [QUEUE]: holds every packet of NFQUEUE QUEUE (0) of this network
namespace for its own random time, uniform between LO_MS and HI_MS milliseconds, then lets it
through: delay, jitter, and the reordering that jitter makes (a packet held 290 ms is passed by
the one behind it held 110 ms). Prints "ready" once bound to the queue; runs until killed.

What netem does in the kernel, done in user space through nfnetlink_queue, for kernels built
without sch_netem (faults.py says why). Speaks the netlink messages directly (nfnetlink_queue's
uapi header, linux/netfilter/nfnetlink_queue.h), with the packets' metadata only: it needs their
ids, never their bytes."""
import heapq
import random
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
SO_RCVBUFFORCE = 33
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG = 0, 1, 2
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN = 1, 2, 3
CMD_BIND = 1
COPY_META = 1
PACKET_HDR = 1
VERDICT_HDR = 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2


def attr(kind, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * (-n % 4)


def message(kind, queue, attrs, flags=NLM_F_REQUEST):
    # nfgenmsg: family, version (NFNETLINK_V0), res_id = the queue, big-endian
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), NFNL_SUBSYS_QUEUE << 8 | kind, flags, 0, 0) + body


def configure(sock, queue):
    """Binds the queue and asks for metadata only; fails on the kernel's error answer."""
    for attrs in ([attr(CFG_CMD, struct.pack("=BxH", CMD_BIND, 0))],
                  [attr(CFG_PARAMS, struct.pack(">IB", 0, COPY_META)),
                   attr(CFG_QUEUE_MAXLEN, struct.pack(">I", 65536))]):
        sock.send(message(MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK))
        data = sock.recv(65536)
        length, kind = struct.unpack_from("=IH", data)
        if kind == NLMSG_ERROR:
            err = struct.unpack_from("=i", data, 16)[0]
            if err:
                raise OSError(-err, f"nfnetlink_queue config of queue {queue}")


def packet_ids(data):
    """The ids of the queued packets in one read (several netlink messages)."""
    off = 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        if kind == NFNL_SUBSYS_QUEUE << 8 | MSG_PACKET:
            a = off + 20
            while a + 4 <= off + length:
                alen, akind = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if akind & 0x3fff == PACKET_HDR:
                    yield struct.unpack_from(">I", data, a + 4)[0]
                a += (alen + 3) & ~3
        off += (length + 3) & ~3


def main():
    lo, hi = float(sys.argv[1]) / 1000, float(sys.argv[2]) / 1000
    queue = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    sock.bind((0, 0))
    configure(sock, queue)
    print("ready", flush=True)
    held = []   # (release time, packet id)
    while True:
        wait = max(0.0, held[0][0] - time.monotonic()) if held else None
        if select.select([sock], [], [], wait)[0]:
            try:
                data = sock.recv(1 << 20)
            except OSError:   # ENOBUFS: the kernel dropped messages; the packets go on
                continue
            now = time.monotonic()
            for pid in packet_ids(data):
                heapq.heappush(held, (now + random.uniform(lo, hi), pid))
        now = time.monotonic()
        while held and held[0][0] <= now:
            pid = heapq.heappop(held)[1]
            sock.send(message(MSG_VERDICT, queue,
                              [attr(VERDICT_HDR, struct.pack(">II", NF_ACCEPT, pid))]))


if __name__ == "__main__":
    main()
