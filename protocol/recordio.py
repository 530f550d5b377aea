"""RecordIO framing as Mesos streams events: ``<decimal length>\\n<bytes>``, back to back.

``RecordIODecoder`` is incremental: feed it chunks of any size (a record split across chunks,
or many records in one chunk) and it returns the complete records. A length above
``max_record`` or a malformed header raises ``RecordIOError`` before anything is buffered.
"""

from __future__ import annotations

__pure__ = True

_MAX_HEADER = 20  # digits of a 64-bit length, plus slack


class RecordIOError(ValueError):
    pass


def encode(record: bytes) -> bytes:
    return b"%d\n%s" % (len(record), record)


class RecordIODecoder:
    def __init__(self, max_record: int = 64 * 1024 * 1024) -> None:
        self.max_record = max_record
        self._buf = bytearray()
        self._need: int | None = None  # length of the record being read, once its header is parsed

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk
        out: list[bytes] = []
        while True:
            if self._need is None:
                nl = self._buf.find(b"\n")
                if nl < 0:
                    if len(self._buf) > _MAX_HEADER:
                        raise RecordIOError("record header too long")
                    return out
                header = bytes(self._buf[:nl])
                if not header.isdigit() or nl > _MAX_HEADER:
                    raise RecordIOError(f"bad record header {header[:_MAX_HEADER]!r}")
                need = int(header)
                if need > self.max_record:
                    raise RecordIOError(f"record of {need} bytes exceeds the limit of {self.max_record}")
                del self._buf[: nl + 1]
                self._need = need
            if len(self._buf) < self._need:
                return out
            out.append(bytes(self._buf[: self._need]))
            del self._buf[: self._need]
            self._need = None

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet make a whole record."""
        return len(self._buf)
