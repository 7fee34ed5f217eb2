"""Worker processes that each run one function on request bodies, behind one socketpair.

What it replaced, `ProcessPoolExecutor`, moved work through 64 KiB pipes: a 700 KB OTLP body
out and the ~400 KB batch back crossed in pieces, each a wakeup of the other side, and the
body was pickled on the way: ~8 us of CPU a span (bench/decode_hop.py; the "server <-> decode
worker" stage of bench/ingest.py --profile). Here each worker has one socketpair with buffers
as large as the system allows (`SOCKET_BUFFER`), a message is its length and its bytes, read
whole (`recv_message`), a body crosses as it is, and a result comes back as one pickle
(protocol 5) whose large buffers (a Batch's Arrow IPC streams) follow it out of band.

On the server side each worker has one thread that sends (a full socket must never block a
caller, least of all the event loop, nor another worker's requests) and one that receives, in
order, the answers to what was sent. A worker that dies fails only the requests it held
(`WorkerDied`) and is replaced. Workers are spawned, never forked (this process's threads hold
DuckDB and socket state), and exit when the server does, even after a kill -9.
"""
from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import pickle
import socket
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from tracefix.collector.threadnames import name_os_thread

log = logging.getLogger("tracefix.collector")

# each direction of each worker's socket: room for a whole request body, so that a send is
# one copy into the kernel and not a ping-pong of wakeups (capped by net.core.wmem_max/rmem_max)
SOCKET_BUFFER = 8 << 20
_LENGTH = struct.Struct("!Q")


class WorkerDied(RuntimeError):
    """The worker process holding this request died before it answered."""


def send_message(sock: socket.socket, data) -> None:
    """One message: its length, then its bytes (b"" asks a worker to leave)."""
    sock.sendall(_LENGTH.pack(len(data)))
    sock.sendall(data)


def recv_message(sock: socket.socket) -> bytes:
    """The next message, read whole: MSG_WAITALL returns once all of it is there, so a large
    message costs this thread one wakeup, not one for each piece the kernel queued."""
    head = _recv_exactly(sock, _LENGTH.size)
    return _recv_exactly(sock, _LENGTH.unpack(head)[0])


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = sock.recv(size, socket.MSG_WAITALL) if size else b""
    if len(data) == size:
        return data
    parts = [data]
    while size - sum(map(len, parts)) > 0:  # a signal cut the wait short, or the other end closed
        part = sock.recv(size - sum(map(len, parts)), socket.MSG_WAITALL)
        if not part:
            raise EOFError("the other end closed")
        parts.append(part)
    return b"".join(parts)


def _widened(sock: socket.socket) -> socket.socket:
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
    return sock


class _Worker:
    """One process, its socket, and the futures of the requests it holds (oldest first)."""

    def __init__(self, fn: Callable, on_death: Callable[["_Worker"], None]):
        ctx = multiprocessing.get_context("spawn")
        self.sock, child = map(_widened, socket.socketpair())
        self.process = ctx.Process(target=_serve, args=(child, os.getpid(), fn), daemon=True,
                                   name="tracefix-decode-worker")
        self.process.start()
        child.close()  # only the worker holds its end: its death is our end's EOF
        self.inflight: collections.deque[Future] = collections.deque()
        self.lock = threading.Lock()  # dead, inflight and queued change together
        self.dead = False
        self.queued = 0  # requests given to it, answered or not
        self._on_death = on_death
        # its own sender: a worker whose socket is full holds up no other worker's requests
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="tracefix-decode-send",
                                          initializer=name_os_thread, initargs=("tf-decode-send",))
        self._receiver = threading.Thread(target=self._receive, name="tracefix-decode-recv", daemon=True)
        self._receiver.start()

    def submit(self, body: bytes, args: tuple) -> Future:
        fut: Future = Future()
        with self.lock:
            self.queued += 1
        try:
            self._sender.submit(self._send, fut, body, args)
        except RuntimeError:  # it died and its sender stopped: a replacement is on its way
            self._fail([fut])
        return fut

    def _fail(self, futs: list[Future]) -> None:
        with self.lock:
            self.queued -= len(futs)
        for fut in futs:
            fut.set_exception(WorkerDied("the decode worker died"))

    def _send(self, fut: Future, body: bytes, args: tuple) -> None:
        """Queue `fut` and write the request (a dead worker fails it)."""
        with self.lock:
            dead = self.dead
            if not dead:
                self.inflight.append(fut)
        if dead:
            self._fail([fut])
            return
        try:
            send_message(self.sock, pickle.dumps(args, protocol=5))
            send_message(self.sock, body)
        except OSError:
            pass  # it died: the receiver sees the end of its socket and fails what it held

    def _receive(self) -> None:
        name_os_thread("tf-decode-recv")
        buffers = iter(lambda: recv_message(self.sock), None)  # out-of-band buffers follow their pickle
        try:
            while True:
                ok, value = pickle.loads(recv_message(self.sock), buffers=buffers)
                with self.lock:
                    fut = self.inflight.popleft()
                    self.queued -= 1
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        except Exception as exc:  # EOF: it died (or was stopped); anything else leaves the stream unknown
            if not isinstance(exc, (EOFError, OSError)):
                log.warning("a decode worker's answer could not be read: %r", exc)
            self._end()

    def _end(self) -> None:
        with self.lock:
            self.dead = True
            held = list(self.inflight)
            self.inflight.clear()
        self._sender.shutdown(wait=False)  # what it still has to send fails (`_send`)
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.sock.close()
        self._on_death(self)  # replaced first: an exporter's retry at once must find the new worker
        self._fail(held)

    def stop(self) -> None:
        self._sender.shutdown(wait=True)
        with self.lock:
            self.dead = True
        try:
            send_message(self.sock, b"")  # the worker's signal to leave
        except OSError:
            pass
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self._receiver.join(5)


class WorkerPool:
    """`workers` processes that answer `fn(body, *args)`; `submit` gives a concurrent Future.

    Workers are started, and replaced, on one thread of the pool's: the kernel's parent-death
    signal follows the thread that started a process, and that thread lives as long as the pool."""

    def __init__(self, fn: Callable, workers: int):
        self._fn = fn
        self._workers: list[_Worker] = []
        self._closed = False
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="tracefix-decode-start")
        self._starter.submit(lambda: self._workers.extend(self._start() for _ in range(workers))).result()

    def _start(self) -> _Worker:
        return _Worker(self._fn, self._died)

    def _died(self, worker: _Worker) -> None:
        if self._closed:
            return
        try:
            self._starter.submit(self._replace, worker).result()
        except Exception:  # the requests it held fail all the same (`_Worker._end`), and the next ones
            log.exception("a decode worker could not be started")

    def submit(self, body: bytes, *args) -> Future:
        worker = min(self._workers, key=lambda w: (w.dead, w.queued))  # alive, least busy
        return worker.submit(body, args)

    def _replace(self, dead: _Worker) -> None:
        if not self._closed and dead in self._workers:
            log.warning("a decode worker died; starting a new one")
            self._workers[self._workers.index(dead)] = self._start()

    def close(self) -> None:
        def stop() -> list[_Worker]:
            self._closed = True
            return self._workers

        for worker in self._starter.submit(stop).result():
            worker.stop()
        self._starter.shutdown(wait=True)


def _serve(sock: socket.socket, server_pid: int, fn: Callable) -> None:
    """A worker's life: answer requests in order until the server sends b"" or goes away."""
    name_os_thread("tf-decode-proc")
    _die_with(server_pid)
    while True:
        try:
            head = recv_message(sock)
        except (EOFError, OSError):
            return
        if not head:
            return
        args = pickle.loads(head)
        body = recv_message(sock)
        try:
            answer = (True, fn(body, *args))
        except Exception as exc:
            answer = (False, exc)
        buffers: list[pickle.PickleBuffer] = []
        try:
            data = pickle.dumps(answer, protocol=5, buffer_callback=buffers.append)
        except Exception as exc:  # an exception that does not pickle still fails its request
            buffers = []
            data = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")), protocol=5)
        send_message(sock, data)
        for buffer in buffers:
            send_message(sock, buffer.raw())


def _die_with(server_pid: int) -> None:
    """Exit when the server is gone, even after a kill -9 that let it close nothing."""
    import ctypes
    import signal

    try:  # Linux: the kernel kills us when the thread that started us ends
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == server_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="tracefix-parent-watch", daemon=True).start()
    if os.getppid() != server_pid:
        os._exit(0)
