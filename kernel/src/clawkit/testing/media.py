"""Small valid files for attachment tests (``clawkit run -a``, serve's image parts, the queue)."""

from __future__ import annotations

import os
import struct
import zlib


def png(width: int = 1, height: int = 1, extra: int = 0) -> bytes:
    """A valid RGB PNG of red pixels; ``extra`` pads it with an ancillary (tEXt) chunk of about that
    many bytes, to make a large one."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    pad = chunk(b"tEXt", b"pad\x00" + os.urandom(extra // 2).hex().encode()[:extra]) if extra else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + pad
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
