"""The sessions a connection has open: at most MAX_OPEN_SESSIONS, of which at most MAX_IDLE_LOADED idle ones in memory.

A session's log holds all it needs to be rebuilt (session_store.py), so a connection keeps in memory only the
sessions it used last: beyond MAX_IDLE_LOADED idle ones, the least recently used is unloaded: its queued updates
are sent and written, its tasks stop, and only its id stays open on the connection (still reserved: no other
connection may load it meanwhile). The next request that names it loads it again from its log, as session/load
does, but without replaying its history to the client, which has it already. A session is idle when no request
is using it (`use`: a prompt uses its session for the whole turn), and a connection runs at most MAX_IN_FLIGHT
requests (request_limit.py): so a connection's memory is bounded whatever its client does. Without a bound on
the ids too, 20,000 session/new on one connection held 471 MB; ids beyond MAX_OPEN_SESSIONS are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable

from warpcode.agent.service.session import AcpSession

MAX_OPEN_SESSIONS = 1_000  # per connection; more are refused with TOO_MANY_SESSIONS
MAX_IDLE_LOADED = 16  # idle sessions a connection keeps in memory; older ones wait on disk until used again
TOO_MANY_SESSIONS = -32004  # JSON-RPC server-defined error (SESSION_BUSY is -32001, TOO_MANY_REQUESTS -32003)

Loader = Callable[[str], Awaitable[AcpSession]]


class OpenSessions:
    """One connection's open session ids; `loaded` holds those in memory, least recently used first. `release` is
    called with each id the connection gives up (its close, or a session that could not be loaded again)."""

    def __init__(
        self,
        release: Callable[[str], None],
        max_open: int = MAX_OPEN_SESSIONS,
        max_idle_loaded: int = MAX_IDLE_LOADED,
    ) -> None:
        self.release, self.max_open, self.max_idle_loaded = release, max_open, max_idle_loaded
        self.loaded: OrderedDict[str, AcpSession] = OrderedDict()
        self._opening: set[str] = set()  # reserved by session/new or session/load, not yet loaded
        self._unloaded: set[str] = set()
        self._unloading: dict[str, asyncio.Task[None]] = {}
        self._reloading: dict[str, asyncio.Task[AcpSession]] = {}
        self._users: Counter[str] = Counter()  # requests using each session: it is not unloaded under them
        self._closed = False  # the connection has ended: its sessions are closed, none unloaded

    def __len__(self) -> int:
        return len(self.loaded) + len(self._opening) + len(self._unloaded) + len(self._unloading)

    @property
    def full(self) -> bool:
        return len(self) >= self.max_open

    def reserve(self, session_id: str) -> None:
        """Count a session being opened (its log created or read) against the limit, before its first await."""
        self._opening.add(session_id)

    def cancel_reservation(self, session_id: str) -> None:
        self._opening.discard(session_id)

    def add(self, session: AcpSession) -> None:
        self._opening.discard(session.session_id)
        self.loaded[session.session_id] = session
        self._unload_idle()

    def reloading(self, session_id: str) -> bool:
        """Whether the session is being loaded again, for a request that will use it."""
        return session_id in self._reloading

    @contextlib.asynccontextmanager
    async def use(self, session_id: str, load: Loader) -> AsyncIterator[AcpSession | None]:
        """The open session, loaded again with `load` if it was unloaded, kept loaded until the block ends; None if
        it is not open on this connection."""
        self._users[session_id] += 1  # before the load's first await: other loads meanwhile leave it loaded
        try:
            yield await self._get(session_id, load)
        finally:
            self._users[session_id] -= 1
            if not self._users[session_id]:
                del self._users[session_id]
            self._unload_idle()

    async def _get(self, session_id: str, load: Loader) -> AcpSession | None:
        if (session := self.loaded.get(session_id)) is not None:
            self.loaded.move_to_end(session_id)
            return session
        if session_id not in self._reloading:
            if self._closed or (session_id not in self._unloaded and session_id not in self._unloading):
                return None
            self._reloading[session_id] = asyncio.ensure_future(self._reload(session_id, load))
        # Shielded: a request cancelled mid-load ($/cancel_request, a closing connection) lets the load finish.
        return await asyncio.shield(self._reloading[session_id])

    async def close_one(self, session_id: str) -> bool:
        """Close one session (cancelling its turn, its log complete) and release its id; False if it is not open on
        this connection (or is still being opened)."""
        if (reloading := self._reloading.get(session_id)) is not None:
            await asyncio.wait([reloading])
        if (session := self.loaded.pop(session_id, None)) is not None:
            await session.close()
        elif (unloading := self._unloading.get(session_id)) is not None:
            await asyncio.wait([unloading])
            self._unloaded.discard(session_id)
        elif session_id in self._unloaded:
            self._unloaded.discard(session_id)
        else:
            return False
        self.release(session_id)
        return True

    async def close(self) -> None:
        """Close every session (cancelling running turns) and release every id."""
        self._closed = True
        try:
            await asyncio.gather(*self._reloading.values(), return_exceptions=True)
            closing = [session.close() for session in self.loaded.values()]
            await asyncio.gather(*closing, *self._unloading.values(), return_exceptions=True)
        finally:
            released = {*self.loaded, *self._opening, *self._unloaded, *self._unloading}
            self.loaded.clear(), self._opening.clear(), self._unloaded.clear()
            for session_id in released:
                self.release(session_id)

    async def _reload(self, session_id: str, load: Loader) -> AcpSession:
        try:
            if (unloading := self._unloading.get(session_id)) is not None:
                await asyncio.wait([unloading])  # its log is complete once its close has ended
            session = await load(session_id)
        except BaseException:
            self._unloaded.discard(session_id)  # its log is gone or unreadable: the id is given up
            self.release(session_id)
            raise
        finally:
            del self._reloading[session_id]
        self._unloaded.discard(session_id)
        self.add(session)
        return session

    def _unload_idle(self) -> None:
        if self._closed:
            return
        idle = [session for session in self.loaded.values() if not (self._users[session.session_id] or session.running)]
        for session in idle[: max(len(idle) - self.max_idle_loaded, 0)]:
            del self.loaded[session.session_id]
            self._unloading[session.session_id] = asyncio.ensure_future(self._unload(session))

    async def _unload(self, session: AcpSession) -> None:
        try:
            await session.close()
        finally:
            del self._unloading[session.session_id]
            self._unloaded.add(session.session_id)
