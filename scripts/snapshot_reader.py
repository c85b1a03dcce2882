#!/usr/bin/env python3
"""An independent reader of larch snapshots (docs/snapshot-format.md), in plain Python 3.

It walks a snapshot, checks every frame checksum, inflates the frames, decodes every record,
recomputes every hash with hashlib.blake2b (the Tezos context schema) and compares it with what the
snapshot claims. It uses only the standard library and holds the back-reference window and the stack,
like the Rust importer (it does not check the inode bucket placement, which the importer does).

Usage: snapshot_reader.py SNAPSHOT [--list]
Prints the commit (base58 and hex) and counts; exits 1 with a message naming the record and
offset on the first problem. --list prints every record (kind, stream offset, hash).
"""

import hashlib
import struct
import sys
import zlib

MAGIC = b"LARCHSNP"
VERSION = 1
FRAME_MAX = 64 * 1024
TAG_NAMES = {1: "contents", 2: "directory", 3: "inode-values", 4: "inode-tree", 5: "commit", 6: "end"}
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class SnapshotError(Exception):
    pass


HASHED = [0]  # bytes of pre-images hashed


def blake(data):
    HASHED[0] += len(data)
    return hashlib.blake2b(data, digest_size=32).digest()


def leb(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def base58check(payload):
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number = int.from_bytes(data, "big")
    text = ""
    while number:
        number, rest = divmod(number, 58)
        text = B58[rest] + text
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + text


def context_hash_text(digest):
    return base58check(b"\x4f\xc7" + digest)


def contents_hash(value):
    return blake(struct.pack(">Q", len(value)) + value)


def flat_hash(entries):
    # entries: (name, is_node, hash), sorted by name
    out = [struct.pack(">Q", len(entries))]
    for name, is_node, digest in entries:
        out.append(b"\0" * 8 if is_node else b"\xff" + b"\0" * 7)
        out.append(leb(len(name)) + name + struct.pack(">Q", 32) + digest)
    return blake(b"".join(out))


def values_hash(entries):
    out = [b"\0", leb(len(entries))]
    for name, is_node, digest in entries:
        out.append(leb(len(name)) + name + (b"\0" if is_node else b"\1") + digest)
    return blake(b"".join(out))


def tree_hash(depth, length, children):
    out = [b"\1", leb(depth), leb(length), leb(len(children))]
    for bucket, digest in children:
        out.append(leb(bucket) + digest)
    return blake(b"".join(out))


def commit_hash(tree, parents, date, author, message):
    out = [struct.pack(">Q", 32), tree, struct.pack(">Q", len(parents))]
    for parent in sorted(parents):
        out.append(struct.pack(">Q", 32) + parent)
    out.append(struct.pack(">q", date))
    for text in (author, message):
        out.append(struct.pack(">Q", len(text)) + text)
    return blake(b"".join(out))


class Stream:
    """The record stream: frames read one at a time, checked and inflated."""

    def __init__(self, handle):
        self.handle = handle
        header = handle.read(24)
        if header[:8] != MAGIC:
            raise SnapshotError("not a larch snapshot (bad magic)")
        if len(header) < 24:
            raise SnapshotError("truncated header")
        if zlib.crc32(header[:20]) != struct.unpack("<I", header[20:24])[0]:
            raise SnapshotError("corrupt header at offset 0: checksum mismatch")
        version, self.window, reserved = struct.unpack("<III", header[8:20])
        if version != VERSION:
            raise SnapshotError("unknown version %d" % version)
        if reserved != 0 or not 1 <= self.window <= 1 << 20:
            raise SnapshotError("corrupt header at offset 0")
        self.file_offset = 24
        self.frame_offset = 24
        self.frame = b""
        self.pos = 0
        self.frame_start = 0  # stream offset of the frame's first byte
        self.frames = 0

    def next_frame(self):
        start = self.file_offset
        head = self.handle.read(9)
        if not head:
            return False
        if len(head) < 9:
            raise SnapshotError("truncated frame header at offset %d" % start)
        codec, raw_len, stored_len = struct.unpack("<BII", head)
        if not 1 <= raw_len <= FRAME_MAX or stored_len > FRAME_MAX:
            raise SnapshotError("corrupt frame at offset %d: lengths" % start)
        body = self.handle.read(stored_len + 4)
        if len(body) < stored_len + 4:
            raise SnapshotError("truncated frame at offset %d" % start)
        stored, crc = body[:stored_len], struct.unpack("<I", body[stored_len:])[0]
        if zlib.crc32(head + stored) != crc:
            raise SnapshotError("corrupt frame at offset %d: checksum mismatch" % start)
        if codec == 0 and stored_len == raw_len:
            raw = stored
        elif codec == 1:
            inflater = zlib.decompressobj(-15)
            raw = inflater.decompress(stored, raw_len + 1)
            if len(raw) != raw_len or not inflater.eof or inflater.unused_data:
                raise SnapshotError("corrupt frame at offset %d: bad deflate data" % start)
        else:
            raise SnapshotError("corrupt frame at offset %d: codec %d" % (start, codec))
        self.frame_start += len(self.frame)
        self.frame, self.pos = raw, 0
        self.frame_offset = start
        self.file_offset = start + 9 + stored_len + 4
        self.frames += 1
        return True

    def offset(self):
        return self.frame_start + self.pos

    def take(self, count):
        parts = []
        while count > 0:
            if self.pos == len(self.frame):
                if not self.next_frame():
                    raise SnapshotError("truncated: the stream ends at file offset %d" % self.file_offset)
            piece = self.frame[self.pos:self.pos + count]
            self.pos += len(piece)
            count -= len(piece)
            parts.append(piece)
        return b"".join(parts)

    def byte(self):
        return self.take(1)[0]

    def leb(self):
        value, shift = 0, 0
        for _ in range(10):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value
        raise SnapshotError("integer longer than 10 bytes")

    def at_end(self):
        return self.pos == len(self.frame) and not self.next_frame()


class Reader:
    def __init__(self, stream, listing):
        self.s = stream
        self.listing = listing
        self.stack = []  # (hash, class, depth, length)
        self.window = {}  # number -> (hash, class, depth, length)
        self.count = 0
        self.records = 0
        self.where = ""

    def fail(self, message):
        raise SnapshotError("%s: %s" % (self.where, message))

    def segment(self):
        k = self.s.leb()
        if k > len(self.stack):
            self.fail("consumes %d stacked objects, %d available" % (k, len(self.stack)))
        return k

    def ref(self, k):
        value = self.s.leb()
        if value < k:
            return self.stack[len(self.stack) - k + value]
        distance = value - k + 1
        if distance > min(self.count, self.s.window):
            self.fail("back-reference out of the window")
        return self.window[self.count - distance]

    def push(self, item):
        self.stack.append(item)
        self.window[self.count] = item
        self.window.pop(self.count - self.s.window, None)
        self.count += 1

    def claim(self, claimed, computed, kind):
        if claimed != computed:
            self.fail("hash mismatch: claims %s, hashes to %s" % (claimed.hex(), computed.hex()))
        if self.listing:
            print("%-12s %10d %s" % (kind, self.start, context_hash_text(computed)))

    def entries(self, k):
        n = self.s.leb()
        out = []
        for _ in range(n):
            tag = self.s.byte()
            length = self.s.leb()
            name = self.s.take(length)
            if tag & 4:
                name = name.hex().encode()
            target = tag & ~4
            if target == 1:
                digest = contents_hash(self.s.take(self.s.leb()))
                out.append((name, False, digest))
            elif target in (0, 2):
                digest, klass, _, _ = self.ref(k)
                if klass != ("dir" if target == 0 else "contents"):
                    self.fail("entry refers to a %s" % klass)
                out.append((name, target == 0, digest))
            else:
                self.fail("unknown entry tag %d" % tag)
        names = [name for name, _, _ in out]
        if any(a >= b for a, b in zip(names, names[1:])):
            self.fail("entries not sorted")
        return out

    def run(self):
        commit = None
        while True:
            self.start = self.s.offset()
            tag = self.s.byte()
            self.where = "%s record #%d at stream offset %d (frame at file offset %d)" % (
                TAG_NAMES.get(tag, "record"), self.records, self.start, self.s.frame_offset)
            if tag == 1:
                value = self.s.take(self.s.leb())
                self.push((contents_hash(value), "contents", 0, 0))
            elif tag in (2, 3):
                claimed = self.s.take(32)
                depth = self.s.byte() if tag == 3 else 0
                k = self.segment()
                entries = self.entries(k)
                del self.stack[len(self.stack) - k:]
                if tag == 2:
                    digest = flat_hash(entries)
                    self.claim(claimed, digest, "directory")
                    self.push((digest, "dir", 0, len(entries)))
                else:
                    digest = values_hash(entries)
                    self.claim(claimed, digest, "inode-values")
                    self.push((digest, "inode", depth, len(entries)))
            elif tag == 4:
                claimed = self.s.take(32)
                depth = self.s.byte()
                length = self.s.leb()
                k = self.segment()
                children = []
                total = 0
                for _ in range(self.s.byte()):
                    bucket = self.s.byte()
                    digest, klass, child_depth, child_length = self.ref(k)
                    if klass != "inode" or child_depth != depth + 1:
                        self.fail("inode tree child is not an inode of the next depth")
                    children.append((bucket, digest))
                    total += child_length
                del self.stack[len(self.stack) - k:]
                if total != length:
                    self.fail("length %d but %d entries below" % (length, total))
                digest = tree_hash(depth, length, children)
                self.claim(claimed, digest, "inode-tree")
                self.push((digest, "dir" if depth == 0 else "inode", depth, length))
            elif tag == 5 and commit is None:
                claimed = self.s.take(32)
                k = self.segment()
                root, klass, _, _ = self.ref(k)
                if klass != "dir":
                    self.fail("the commit's root is not a directory")
                del self.stack[len(self.stack) - k:]
                parents = [self.s.take(32) for _ in range(self.s.leb())]
                (date,) = struct.unpack("<q", self.s.take(8))
                author = self.s.take(self.s.leb())
                message = self.s.take(self.s.leb())
                digest = commit_hash(root, parents, date, author, message)
                self.claim(claimed, digest, "commit")
                commit = (digest, root, parents, date, author, message)
            elif tag == 6 and commit is not None:
                if self.s.leb() != self.count:
                    self.fail("the end record's object count is wrong")
                if self.stack:
                    self.fail("%d objects are referred to by no record" % len(self.stack))
                if not self.s.at_end():
                    self.fail("bytes after the end record")
                self.records += 1
                return commit
            else:
                self.fail("unexpected record tag %d" % tag)
            self.records += 1


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        with open(argv[1], "rb") as handle:
            stream = Stream(handle)
            reader = Reader(stream, "--list" in argv[2:])
            digest, root, parents, date, author, message = reader.run()
    except SnapshotError as error:
        print("snapshot_reader: error: %s" % error, file=sys.stderr)
        return 1
    print("commit %s %s" % (context_hash_text(digest), digest.hex()))
    print("tree %s %s" % (context_hash_text(root), root.hex()))
    for parent in parents:
        print("parent %s %s" % (context_hash_text(parent), parent.hex()))
    print("date %d author %s message %s" % (date, author.decode(), message.decode()))
    print("objects %d records %d frames %d stream-bytes %d file-bytes %d hashed-bytes %d" % (
        reader.count, reader.records, stream.frames, stream.offset(), stream.file_offset, HASHED[0]))
    print("ok: every hash verified")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
