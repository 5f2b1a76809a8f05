// Which links from the model's text may be opened outside VS Code: web and mail addresses only. The chat view
// shows nothing else as a link, and the extension opens nothing else (a `javascript:`, `file:` or `command:` URL
// would run or reveal something on a click).

const OPENABLE = new Set(["http:", "https:", "mailto:"]);

// The URL to open, or null when it is not a web or mail address.
export function externalLink(url: string): string | null {
  if (!URL.canParse(url)) return null;
  const parsed = new URL(url);
  return OPENABLE.has(parsed.protocol) ? parsed.href : null;
}
