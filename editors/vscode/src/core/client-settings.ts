// The extension's settings (package.json `contributes.configuration`) as the client's options. All five run a
// command (serverCommand, mcpServers) or decide where the token goes, so they come from the user's own settings only: a workspace or folder
// value (a repository's .vscode/settings.json) could run the repository's command or send the token, or any file
// named as the token file, to the repository's URL. package.json scopes them "machine" and lists them under
// restrictedConfigurations, so VS Code itself drops such values; reading only the user's value holds on a VS Code
// that does not, and in a folder trusted by mistake. The values that were dropped are named, to tell the user.

import * as os from "node:os";
import { mcpServersFromSetting } from "./mcp-servers.js";
import type { ClientOptions } from "./warpcode-client.js";

export const DEFAULT_URL = "ws://127.0.0.1:8765/acp";

// The values of one setting per scope, as VS Code's WorkspaceConfiguration.inspect reports them.
export interface SettingValues<T> {
  defaultValue?: T;
  globalValue?: T; // the user's settings (local, or the remote machine's)
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

export interface SettingsSource {
  inspect<T>(key: string): SettingValues<T> | undefined;
}

export interface ClientSettings {
  options: Pick<ClientOptions, "url" | "token" | "serverCommand" | "mcpServers">;
  ignored: string[]; // the settings a workspace or folder set, by their full names
  problems: string[]; // what is wrong in the user's own values (an MCP server left out), one line each
}

export function clientSettings(source: SettingsSource): ClientSettings {
  const ignored: string[] = [];
  const userValue = (key: string): unknown => {
    const values = source.inspect<unknown>(key);
    if (values?.workspaceValue !== undefined || values?.workspaceFolderValue !== undefined) ignored.push(`warpcode.${key}`);
    return values?.globalValue ?? values?.defaultValue;
  };
  const user = (key: string): string => {
    const value = userValue(key);
    return typeof value === "string" ? value.trim() : "";
  };
  const url = user("url") || DEFAULT_URL;
  const token = { token: user("token"), tokenFile: user("tokenFile") };
  const command = user("serverCommand");
  const mcp = mcpServersFromSetting(userValue("mcpServers"));
  return {
    // The command runs in the home folder, never in the workspace: files there would change what it runs
    // (`python3 -m` imports from its folder first, `npx` runs the folder's node_modules/.bin).
    options: { url, token, serverCommand: command ? { command, shell: true, cwd: os.homedir() } : null, mcpServers: mcp.servers },
    ignored,
    problems: mcp.problems,
  };
}
