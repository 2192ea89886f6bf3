"""A WorkerChannel over a container's attached stdin/stdout (the `docker` backend's transport).

The container runs `python3 -s -S -B -c BOOTSTRAP N`: the bootstrap reads exactly N bytes from stdin (the source of
executor_svc/worker.py, sent by the backend right after start), forks, and the child execs that source as the worker
(`--own-pid-namespace`: the container is its private pid namespace; `--scratch /tmp/w`: a scratch base the worker
owns, as under bubblewrap, so it can repair what a program did to it; /tmp itself is the root-owned tmpfs).
The bootstrap stays pid 1 and only reaps: the kernel ignores SIGKILL sent to a namespace's init from inside, so with
the worker as pid 1 a program could not take its worker down in a container the way it can under bubblewrap; as
pid 2+ it can, and a dead worker ends the container (pid 1 exits with it), which this channel sees as end of stream.

Stream format: the container has no TTY, so Docker multiplexes what it writes to the attach socket into frames
(8-byte header: stream id, 3 zero bytes, big-endian length; stream 1 = stdout, 2 = stderr). stdout frames carry our
JSON lines; the tail of stderr is kept for error messages. Our writes to the socket are the container's raw stdin.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from collections.abc import Callable

from executor_svc.channel import ReplyTimeout, WorkerLost, take_reply
from executor_svc.wire_types import JsonObject

MAX_REPLY_BYTES = 256 << 20
SEND_TIMEOUT_S = 30.0
STDERR_TAIL_BYTES = 2048
FRAME_HEADER = struct.Struct(">BxxxL")
STDOUT, STDERR = 1, 2

BOOTSTRAP = (
    "import os,sys\n"
    "n=int(sys.argv[1]);b=b''\n"
    "while len(b)<n:\n"
    " c=os.read(0,n-len(b))\n"
    " if not c:os._exit(3)\n"
    " b+=c\n"
    "os.mkdir('/tmp/w',0o755)\n"
    "p=os.fork()\n"
    "if p==0:\n"
    " sys.argv=['/azr/worker.py','--scratch','/tmp/w','--own-pid-namespace']\n"
    " try:exec(compile(b,'/azr/worker.py','exec'),{'__name__':'__main__','__file__':'/azr/worker.py'})\n"
    " except SystemExit as e:os._exit(e.code if isinstance(e.code,int) else 1)\n"
    " os._exit(0)\n"
    "os.close(0);os.close(1)\n"
    "while 1:\n"
    " q,s=os.wait()\n"
    " if q==p:os._exit(128+os.WTERMSIG(s) if os.WIFSIGNALED(s) else os.WEXITSTATUS(s))\n"
)
"""pid 1 of a worker container: read the worker program from stdin, fork it, reap orphans, exit with the worker."""


class DockerWorkerChannel:
    """One worker container spoken to over its attach socket (implements executor_svc.channel.WorkerChannel).

    `raw` is the hijacked attach connection (stdin, stdout and stderr, attached before the container started, so
    nothing it writes is missed); `keepalive` holds the HTTP response that owns it; `remove` force-removes the
    container and is called once, by close().
    """

    def __init__(self, container_id: str, raw: socket.socket, keepalive: object, remove: Callable[[], None],
                 host_pid: int | None = None) -> None:
        self.container_id = container_id
        self.host_pid = host_pid
        self._raw = raw
        self._keepalive = keepalive
        self._remove = remove
        self._frames = bytearray()  # undecoded bytes from the socket
        self._stdout = bytearray()  # decoded stdout not yet returned as a line
        self._stderr = bytearray()
        self._eof = False
        self._closed = False
        raw.setblocking(False)

    @property
    def pid(self) -> int | None:
        """Host pid of the container's init (our bootstrap), for operators and process-table checks."""
        return self.host_pid

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the container's stdin (the worker program at start, then JSON lines)."""
        view = memoryview(data)
        deadline = time.monotonic() + SEND_TIMEOUT_S
        poller = select.poll()
        poller.register(self._raw, select.POLLOUT)
        try:
            while view:
                if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    raise ReplyTimeout("the container does not read its stdin")
                try:
                    view = view[self._raw.send(view):]
                except BlockingIOError:
                    continue
        except (OSError, ValueError) as exc:
            raise WorkerLost(self._why(f"cannot write to the container: {exc}")) from exc

    def send(self, message: JsonObject) -> None:
        self.send_bytes((json.dumps(message) + "\n").encode("ascii"))

    def receive(self, timeout_s: float) -> JsonObject:
        deadline = time.monotonic() + timeout_s
        poller = select.poll()
        poller.register(self._raw, select.POLLIN)
        while b"\n" not in self._stdout:
            if self._eof:
                raise WorkerLost(self._why("the container closed its output"))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReplyTimeout(f"no reply within {timeout_s:.1f}s")
            if poller.poll(remaining * 1000):
                self._read_available()
            if len(self._stdout) > MAX_REPLY_BYTES:
                raise WorkerLost("the worker's reply is too long")
        return take_reply(self._stdout)

    def _read_available(self) -> None:
        """Read what the socket has and split it into stdout/stderr by frame; notes end of stream."""
        try:
            chunk = self._raw.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            self._eof = True
            self._stderr += f"[attach socket: {exc}]".encode()
            return
        if not chunk:
            self._eof = True
            return
        self._frames += chunk
        while len(self._frames) >= FRAME_HEADER.size:
            stream, size = FRAME_HEADER.unpack_from(self._frames)
            if len(self._frames) < FRAME_HEADER.size + size:
                break
            payload = bytes(self._frames[FRAME_HEADER.size:FRAME_HEADER.size + size])
            del self._frames[:FRAME_HEADER.size + size]
            if stream == STDOUT:
                self._stdout += payload
            elif stream == STDERR:
                self._stderr = (self._stderr + payload)[-STDERR_TAIL_BYTES:]

    def alive(self) -> bool:
        """Cheap (no Docker API call, it runs before every request): not closed and the stream has not ended."""
        if self._closed or self._eof:
            return False
        poller = select.poll()
        poller.register(self._raw, select.POLLIN)
        if poller.poll(0):  # readable while idle: end of stream, or stray output to take in now
            self._read_available()
        return not self._eof

    def close(self) -> None:
        """Force-remove the container (SIGKILL, then delete) and drop the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._remove()
        finally:
            try:
                self._raw.close()
            finally:
                close = getattr(self._keepalive, "close", None)
                if callable(close):
                    close()

    def _why(self, what: str) -> str:
        """`what`, plus the tail of the container's stderr when it wrote any."""
        tail = self._stderr.decode("utf-8", "replace").strip()[-600:]
        return f"{what}{': ' + tail if tail else ''}"
