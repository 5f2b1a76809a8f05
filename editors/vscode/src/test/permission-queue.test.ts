// The permission queue: answers settle with the chosen option, cancelling a session settles its questions with
// ACP's `cancelled` outcome (and only its own), an answer that is not offered is refused.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk";
import { PermissionQueue } from "../core/permission-queue.js";

const question = (sessionId: string, command: string): RequestPermissionRequest => ({
  sessionId,
  toolCall: { toolCallId: command, title: `Run ${command}`, kind: "execute", rawInput: { command } },
  options: [
    { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
    { optionId: "reject_once", name: "Reject once", kind: "reject_once" },
  ],
});

test("answer, cancel one session's questions, refuse an answer not offered", async () => {
  const queue = new PermissionQueue();
  let changes = 0;
  queue.onChange(() => changes++);
  const first = queue.ask(question("s1", "make"));
  const second = queue.ask(question("s1", "make test"));
  const other = queue.ask(question("s2", "ls"));
  assert.deepEqual(queue.views("s1").map((v) => [v.title, v.command]), [["Run make", "make"], ["Run make test", "make test"]]);

  const [asked] = queue.views("s1");
  assert.throws(() => queue.answer(asked!.requestId, "allow_always"), /"allow_always" is not one of this question's answers/);
  queue.answer(asked!.requestId, "allow_once");
  assert.deepEqual(await first, { outcome: { outcome: "selected", optionId: "allow_once" } });

  queue.cancelSession("s1");
  assert.deepEqual(await second, { outcome: { outcome: "cancelled" } });
  assert.deepEqual(queue.views("s1"), []);
  assert.equal(queue.views("s2").length, 1);
  queue.cancelAll();
  assert.deepEqual(await other, { outcome: { outcome: "cancelled" } });
  assert.equal(changes, 6); // three asks, one answer, two cancellations
});
