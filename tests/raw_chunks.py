"""A raw HTTP/1.1 client for streaming endpoints that keeps the HTTP chunk boundaries (a real
socket, no HTTP library in between): what a Mesos client that reads one RecordIO record per
chunk sees."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from protocol import recordio


class RawChunkStream:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host, self.port = parts.hostname, parts.port
        self.status = 0
        self.headers: dict[str, str] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        """Send the request and read the response head."""
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await self._writer.drain()
        status = await self._reader.readline()
        self.status = int(status.split()[1])
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            self.headers[k.strip().lower()] = v.strip()

    async def chunk(self) -> bytes:
        """The data of the next HTTP chunk (b"" for the last, zero-length one)."""
        assert self._reader is not None
        size_line = await self._reader.readline()
        if not size_line:
            raise ConnectionResetError("stream ended without the last chunk")
        size = int(size_line.split(b";")[0].strip(), 16)
        data = await self._reader.readexactly(size)
        assert await self._reader.readexactly(2) == b"\r\n"
        return data

    async def record(self) -> bytes:
        """The next chunk, which must hold exactly one whole RecordIO record; the record."""
        data = await self.chunk()
        records = recordio.RecordIODecoder().feed(data)
        assert len(records) == 1 and recordio.encode(records[0]) == data, f"chunk is not one record: {data[:200]!r}"
        return records[0]

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass
