// The permission queue: session/request_permission questions waiting for the user's answer. Each question is a
// promise the connection's handler awaits; answering (an option id), cancelling the session's turn or losing the
// connection settles it, the last two with ACP's `cancelled` outcome.

import type { RequestPermissionRequest, RequestPermissionResponse } from "@agentclientprotocol/sdk";
import { diffFromContent } from "./diff-model.js";
import type { PermissionView } from "./view-state.js";

interface Pending {
  requestId: number;
  request: RequestPermissionRequest;
  settle: (response: RequestPermissionResponse) => void;
}

export class PermissionQueue {
  private pending: Pending[] = [];
  private nextId = 1;
  private listeners = new Set<() => void>();

  ask(request: RequestPermissionRequest): Promise<RequestPermissionResponse> {
    return new Promise((settle) => {
      this.pending.push({ requestId: this.nextId++, request, settle });
      this.changed();
    });
  }

  // The questions of one session, oldest first.
  views(sessionId: string): PermissionView[] {
    return this.pending.filter((p) => p.request.sessionId === sessionId).map(permissionView);
  }

  answer(requestId: number, optionId: string): void {
    const found = this.pending.find((p) => p.requestId === requestId);
    if (found === undefined) return; // already settled (cancelled meanwhile, or answered twice)
    if (!found.request.options.some((option) => option.optionId === optionId)) {
      throw new Error(`"${optionId}" is not one of this question's answers`);
    }
    this.settle(found, { outcome: { outcome: "selected", optionId } });
  }

  cancelSession(sessionId: string): void {
    for (const found of this.pending.filter((p) => p.request.sessionId === sessionId)) {
      this.settle(found, { outcome: { outcome: "cancelled" } });
    }
  }

  cancelAll(): void {
    for (const found of [...this.pending]) this.settle(found, { outcome: { outcome: "cancelled" } });
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private settle(found: Pending, response: RequestPermissionResponse): void {
    this.pending = this.pending.filter((p) => p !== found);
    found.settle(response);
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

function permissionView({ requestId, request }: Pending): PermissionView {
  const call = request.toolCall;
  const input = call.rawInput as { command?: unknown } | null | undefined;
  return {
    requestId,
    title: call.title ?? "a tool call",
    toolKind: call.kind ?? "other",
    command: typeof input?.command === "string" ? input.command : null,
    diffs: (call.content ?? []).flatMap((part) => (part.type === "diff" ? [diffFromContent(part)] : [])),
    options: request.options.map(({ optionId, name, kind }) => ({ optionId, name, kind })),
  };
}
