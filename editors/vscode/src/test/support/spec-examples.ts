// The JSON examples of the ACP 1.21 docs (slash commands, session config options), kept once for the Python and
// the extension's tests in tests/fixtures/acp/docs-examples-v1.21.0.json, which names its source.

import { readFileSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { AvailableCommandsUpdate, NewSessionResponse, SetSessionConfigOptionRequest } from "@agentclientprotocol/sdk";

const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../../tests/fixtures/acp/docs-examples-v1.21.0.json");
const examples = JSON.parse(readFileSync(file, "utf8"));

export const SPEC_NEW_SESSION: NewSessionResponse = examples.sessionNew.result;
export const SPEC_COMMANDS: AvailableCommandsUpdate & { sessionUpdate: "available_commands_update" } = examples.availableCommandsUpdate.params.update;
export const SPEC_SET_CONFIG: SetSessionConfigOptionRequest = examples.setConfigOption.params;
export const SPEC_COMMAND_PROMPT_TEXT: string = examples.commandPrompt.params.prompt[0].text;
