"""Files through the editor: a Workspace whose text reads and writes go to the ACP client's fs methods.

Clients that advertise fs.readTextFile / fs.writeTextFile own the open buffers, so their unsaved text must win
over the disk and our edits must land in the buffer. Every tool goes through `Workspace.read_text` /
`write_text`, so overriding those two covers read_file, edit_file and write_file, and apply_patch for the files it
modifies (`text_kept_elsewhere`; files it creates, deletes or renames are written on the disk); the workspace's
own path rules (resolve, refuse escapes and protected directories) always run first.

With fs reads, a file's fingerprint (what the write tools compare to refuse overwriting a file changed behind
the agent's back) is a digest of the text the agent saw through the editor, so the editor saving the agent's own
buffer edit to the disk does not count as a change.

Tools run in worker threads while the connection lives on the event loop: each call is handed to the loop and
waited for. `cancel_pending` fails the waits at once, so a cancelled turn never hangs on a silent client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from warpcode.tools import ToolError, Workspace
from warpcode.tools.textcodec import TextFile, decode
from warpcode.tools.workspace import MAX_TEXT_BYTES, fingerprint_text

CLIENT_FS_TIMEOUT_S = 30.0


class ClientFiles:
    """The client's fs methods as blocking calls for worker threads. `conn` is the SDK's client proxy."""

    def __init__(self, conn: Any, session_id: str, loop: asyncio.AbstractEventLoop, read: bool, write: bool) -> None:
        self.conn, self.session_id, self.loop = conn, session_id, loop
        self.can_read, self.can_write = read, write
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def read(self, path: Path) -> str:
        response = self._call(self.conn.read_text_file(session_id=self.session_id, path=str(path)), "read", path)
        return response.content

    def write(self, path: Path, text: str) -> None:
        self._call(self.conn.write_text_file(session_id=self.session_id, path=str(path), content=text), "write", path)

    def cancel_pending(self) -> None:
        for future in list(self._pending):
            future.cancel()

    def _call(self, request: Coroutine[Any, Any, Any], verb: str, path: Path) -> Any:
        future = asyncio.run_coroutine_threadsafe(request, self.loop)
        self._pending.add(future)
        try:
            return future.result(CLIENT_FS_TIMEOUT_S)
        except concurrent.futures.CancelledError:
            raise ToolError(f"Stopped: the turn was cancelled while the editor was asked to {verb} {path}.") from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"The editor did not answer within {CLIENT_FS_TIMEOUT_S:.0f} s to {verb} {path}.") from None
        except Exception as exc:  # the client's JSON-RPC error: an answer for the model, not a crash
            raise ToolError(f"The editor could not {verb} {path}: {exc}") from None
        finally:
            self._pending.discard(future)


class ClientFileWorkspace(Workspace):
    def __init__(
        self, root: str | os.PathLike[str], files: ClientFiles, state_dir: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__(root, state_dir)
        self.files = files
        self.text_kept_elsewhere = files.can_read or files.can_write

    def read_text(self, path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_BYTES) -> TextFile:
        on_disk = super().read_text(path, max_bytes)  # path rules, and the missing/binary/too-large errors
        if not self.files.can_read:
            return on_disk
        text = on_disk.normalize(self.files.read(self.resolve(path)))
        return replace(on_disk, text=text, invalid_utf8=False, fingerprint=fingerprint_text(text))

    def fingerprint_of(self, data: bytes) -> str:
        if not self.files.can_read:
            return super().fingerprint_of(data)
        return fingerprint_text(decode(data).text)

    def write_text(self, path: str | os.PathLike[str], text: str, like: TextFile | None = None) -> Path:
        if not self.files.can_write:
            return super().write_text(path, text, like)
        target = self.resolve_for_write(path)
        if target.exists() and not target.is_file():
            return super().write_text(path, text, like)  # raises the tools' own NotAFile / SpecialFile
        self.files.write(target, text.replace("\n", "\r\n") if like is not None and like.crlf else text)
        if self.files.can_read:
            self.remember(target, fingerprint_text(text))
        else:
            self.forget(target)  # what the disk will hold once the editor saves is unknown
        return target
