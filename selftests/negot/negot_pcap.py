#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""List the SYNs and SYN-ACKs of a pcap file with their TCP options.

    negot_pcap.py FILE.pcap

One line per SYN or SYN-ACK (Ethernet or Linux cooked capture, IPv4 or
IPv6), key=value words:

    syn|synack ip=4|6 src= sport= dst= dport= opts=HEX masked=HEX nosmr=HEX
        kinds=2,4,8,1,3,254 smr=HEX|- smr_exid= smr_role= smr_nonce=
        [answer=proof|echo|other|nosyn]

masked is opts with the timestamp values zeroed (they differ between any
two connections); nosmr is masked without SMR's option (kind 254, ExID
534d5231). For a SYN-ACK with SMR's option, answer compares it with the SYN
of the same connection seen before it: proof (role 2 and the nonce's proof,
Documentation/protocol.rst), echo (the SYN's own option bytes), other.
A truncated last record (the capture still running) is ignored.
"""
import ipaddress
import struct
import sys

SMR_KIND = 254
SMR_EXID = bytes.fromhex("534d5231")


def smr_proof(nonce):
    ror = ((nonce >> 11) | (nonce << 21)) & 0xFFFFFFFF
    return ror ^ 0x5A17C3E9


def parse_options(opts):
    """[(kind, bytes of the whole option)], stopping at EOL or garbage."""
    out = []
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            out.append((0, opts[i:i + 1]))
            break
        if kind == 1:
            out.append((1, opts[i:i + 1]))
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2 or i + opts[i + 1] > len(opts):
            out.append((-1, opts[i:]))
            break
        out.append((kind, opts[i:i + opts[i + 1]]))
        i += opts[i + 1]
    return out


def is_smr(kind, raw):
    return kind == SMR_KIND and len(raw) == 12 and raw[2:6] == SMR_EXID


def describe(opts):
    parsed = parse_options(opts)
    masked = b""
    nosmr = b""
    smr = None
    for kind, raw in parsed:
        m = raw
        if kind == 8 and len(raw) == 10:
            m = raw[:2] + bytes(8)
        masked += m
        if is_smr(kind, raw):
            smr = raw
        else:
            nosmr += m
    return parsed, masked, nosmr, smr


def packets(data):
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise SystemExit("negot_pcap: not a pcap file (pcapng is not read)")
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        if off + caplen > len(data):
            break
        yield linktype, data[off:off + caplen]
        off += caplen


def network_layer(linktype, frame):
    """(ethertype, payload) of an Ethernet or Linux cooked frame."""
    if linktype == 1:
        etype = struct.unpack_from("!H", frame, 12)[0]
        off = 14
        while etype == 0x8100 and len(frame) >= off + 4:
            etype = struct.unpack_from("!H", frame, off + 2)[0]
            off += 4
        return etype, frame[off:]
    if linktype == 113:
        return struct.unpack_from("!H", frame, 14)[0], frame[16:]
    return None, None


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: negot_pcap.py FILE.pcap")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    syn_opt = {}
    for linktype, frame in packets(data):
        etype, pkt = network_layer(linktype, frame)
        if etype == 0x0800 and len(pkt) >= 20 and pkt[9] == 6:
            ihl = (pkt[0] & 0xF) * 4
            ipv, src, dst, tcp = 4, pkt[12:16], pkt[16:20], pkt[ihl:]
        elif etype == 0x86DD and len(pkt) >= 40 and pkt[6] == 6:
            ipv, src, dst, tcp = 6, pkt[8:24], pkt[24:40], pkt[40:]
        else:
            continue
        if len(tcp) < 20:
            continue
        sport, dport = struct.unpack_from("!HH", tcp, 0)
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        if not flags & 0x02 or flags & 0x04 or doff < 20 or len(tcp) < doff:
            continue
        synack = bool(flags & 0x10)
        opts = tcp[20:doff]
        parsed, masked, nosmr, smr = describe(opts)
        srcs = str(ipaddress.ip_address(bytes(src)))
        dsts = str(ipaddress.ip_address(bytes(dst)))
        words = [
            "synack" if synack else "syn", "ip=%d" % ipv,
            "src=" + srcs, "sport=%d" % sport, "dst=" + dsts, "dport=%d" % dport,
            "opts=" + (opts.hex() or "-"), "masked=" + (masked.hex() or "-"),
            "nosmr=" + (nosmr.hex() or "-"),
            "kinds=" + (",".join(str(k) for k, _ in parsed) or "-"),
        ]
        if smr is not None:
            nonce = struct.unpack_from("!I", smr, 8)[0]
            words += ["smr=" + smr.hex(), "smr_exid=" + smr[2:6].hex(),
                      "smr_role=%d" % (smr[6] & 0xF), "smr_ver=%d" % (smr[6] >> 4),
                      "smr_flags=%d" % smr[7], "smr_nonce=%08x" % nonce]
        else:
            words += ["smr=-"]
        # the connection, keyed from the client's side
        if synack:
            key = (dsts, dport, srcs, sport)
            if smr is not None:
                offer = syn_opt.get(key)
                if offer is None:
                    answer = "nosyn"
                elif smr == offer:
                    answer = "echo"
                elif (smr[6] & 0xF) == 2 and \
                        struct.unpack_from("!I", smr, 8)[0] == \
                        smr_proof(struct.unpack_from("!I", offer, 8)[0]):
                    answer = "proof"
                else:
                    answer = "other"
                words.append("answer=" + answer)
        else:
            key = (srcs, sport, dsts, dport)
            if smr is not None:
                syn_opt[key] = smr
            else:
                syn_opt.pop(key, None)
        print(" ".join(words))


if __name__ == "__main__":
    main()
