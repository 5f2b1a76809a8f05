// The agent's slash commands (ACP `available_commands_update`) as the chat input completes them: typing `/` and the
// beginning of a name lists the commands that start so, in the agent's order; picking one puts `/name ` in the box,
// and the command's input hint shows until something follows the name. The prompt is then sent as typed: ACP runs a
// command as a prompt whose text begins with `/name`, so nothing else is needed to run one.

import type { AvailableCommand } from "@agentclientprotocol/sdk";

export interface CommandChoice {
  name: string;
  description: string;
  hint: string | null; // what to type after the name, when the command takes input
}

export function commandChoices(commands: AvailableCommand[]): CommandChoice[] {
  return commands.map(({ name, description, input }) => ({ name, description, hint: input?.hint ?? null }));
}

// The commands the box's text could be the start of: `/` then part of a name, nothing after it yet.
export function matchingCommands(text: string, commands: CommandChoice[]): CommandChoice[] {
  const typed = /^\/(\S*)$/.exec(text);
  if (typed === null) return [];
  return commands.filter((command) => command.name.startsWith(typed[1]!));
}

// The box's text once `command` is picked: its name and a space, ready for its input.
export function completedText(command: CommandChoice): string {
  return `/${command.name} `;
}

// The input hint to show while the box holds a command's name and nothing after it (`/web ` shows the query hint).
export function pendingHint(text: string, commands: CommandChoice[]): string | null {
  const typed = /^\/(\S+) ?$/.exec(text);
  return typed === null ? null : (commands.find((command) => command.name === typed[1])?.hint ?? null);
}
