// "Undo last turn" and "Restore checkpoint…" over `_warpcode/checkpoints` and `_warpcode/restore`. A checkpoint is
// taken before each turn's first edit, so restoring the newest one undoes the last turn; undoing again goes one
// turn further back (the checkpoints an undo restored, and the one it took of what it replaced, are skipped),
// as `warpcode chat`'s /undo does.

import type { Checkpoint, Restored } from "./agent-connection.js";
import type { WarpcodeClient } from "./warpcode-client.js";

export class CheckpointActions {
  private readonly undone = new Map<string, Set<string>>(); // per session

  constructor(private readonly client: WarpcodeClient) {}

  // Newest first.
  list(sessionId: string): Promise<Checkpoint[]> {
    return this.client.checkpoints(sessionId);
  }

  // null when there is nothing (left) to undo.
  async undoLastTurn(sessionId: string): Promise<Restored | null> {
    const undone = this.undoneIn(sessionId);
    const newest = (await this.list(sessionId)).find((checkpoint) => !undone.has(checkpoint.id));
    return newest === undefined ? null : this.restore(sessionId, newest.id);
  }

  async restore(sessionId: string, checkpointId: string): Promise<Restored> {
    const restored = await this.client.restore(sessionId, checkpointId);
    const undone = this.undoneIn(sessionId);
    undone.add(restored.restored);
    undone.add(restored.undoCheckpointId);
    return restored;
  }

  private undoneIn(sessionId: string): Set<string> {
    let undone = this.undone.get(sessionId);
    if (undone === undefined) this.undone.set(sessionId, (undone = new Set()));
    return undone;
  }
}
