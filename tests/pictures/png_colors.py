"""Counts the pixels of each colour in a PNG (8-bit RGB or RGBA, not interlaced), using only the
standard library. Usage: png_colors.py IMAGE.png [#rrggbb ...]
Prints "size W H", "colours N" (distinct colours), then "#rrggbb COUNT" for each colour asked.
"""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise SystemExit(f"{path}: unsupported PNG (depth {depth}, type {ctype})")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return width, height, rows, bpp


def main():
    width, height, rows, bpp = pixels(sys.argv[1])
    counts = {}
    for line in rows:
        for i in range(0, len(line), bpp):
            key = "#%02x%02x%02x" % (line[i], line[i + 1], line[i + 2])
            counts[key] = counts.get(key, 0) + 1
    print(f"size {width} {height}")
    print(f"colours {len(counts)}")
    for c in sys.argv[2:]:
        print(f"{c.lower()} {counts.get(c.lower(), 0)}")


main()
