// Slash-command completion in the prompt box: while the box holds `/` and part of a name, the agent's commands
// that start so are listed under it (core/slash-commands.ts decides which); ↑/↓ pick, Tab or Enter puts the
// picked one in the box (Enter on a whole name of a command without input sends it), Escape closes the list, a
// click picks. Once a name is complete its input hint shows.

import { completedText, matchingCommands, pendingHint, type CommandChoice } from "../core/slash-commands.js";
import { renderCompletions } from "./render.js";

export class CommandCompletion {
  private commands: CommandChoice[] = [];
  private matches: CommandChoice[] = [];
  private selected = 0;
  private dismissed: string | null = null; // the text Escape closed the list on

  constructor(
    private readonly prompt: HTMLTextAreaElement,
    private readonly list: HTMLElement,
  ) {
    prompt.addEventListener("input", () => this.refresh());
    list.addEventListener("mousedown", (event) => {
      const item = (event.target as Element).closest<HTMLElement>("[data-index]");
      if (item === null) return;
      event.preventDefault(); // the box keeps the focus
      this.pick(Number(item.dataset.index));
    });
  }

  // The session's commands, from each posted state.
  setCommands(commands: CommandChoice[]): void {
    if (commands === this.commands) return;
    this.commands = commands;
    this.refresh();
  }

  // A key in the prompt box: true when the list used it (the box must not act on it too).
  handleKey(event: KeyboardEvent): boolean {
    if (this.matches.length === 0 || event.isComposing) return false;
    switch (event.key) {
      case "ArrowDown":
      case "ArrowUp": {
        const step = event.key === "ArrowDown" ? 1 : -1;
        this.selected = (this.selected + step + this.matches.length) % this.matches.length;
        this.show();
        break;
      }
      case "Enter":
        if (event.shiftKey || this.isWholeCommand()) return false; // `/test` typed out: Enter sends it
        this.pick(this.selected);
        break;
      case "Tab":
        this.pick(this.selected);
        break;
      case "Escape":
        this.dismissed = this.prompt.value;
        this.refresh();
        break;
      default:
        return false;
    }
    event.preventDefault();
    return true;
  }

  // The box holds the picked command's whole name, and the command takes no input.
  private isWholeCommand(): boolean {
    const command = this.matches[this.selected]!;
    return this.prompt.value === `/${command.name}` && command.hint === null;
  }

  private pick(index: number): void {
    const command = this.matches[index];
    if (command === undefined) return;
    this.prompt.value = completedText(command);
    this.prompt.setSelectionRange(this.prompt.value.length, this.prompt.value.length);
    this.refresh();
  }

  private refresh(): void {
    const text = this.prompt.value;
    if (this.dismissed !== null && this.dismissed !== text) this.dismissed = null;
    const matches = this.dismissed === null ? matchingCommands(text, this.commands) : [];
    if (matches.map((c) => c.name).join() !== this.matches.map((c) => c.name).join()) this.selected = 0;
    this.matches = matches;
    this.show();
  }

  private show(): void {
    const html = renderCompletions(this.matches, this.selected, pendingHint(this.prompt.value, this.commands));
    if (this.list.innerHTML !== html) this.list.innerHTML = html;
    this.list.hidden = html === "";
  }
}
