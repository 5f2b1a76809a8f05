// The chat webview's page: a content security policy that lets in only our script (by nonce) and stylesheet, the
// region main.ts renders into, and the prompt box (outside it, so a render never loses what is being typed) with the
// list of slash commands it completes.

import { escape } from "./escape.js";

export interface PageResources {
  cspSource: string; // where the stylesheet may come from (the webview's asWebviewUri origin)
  nonce: string;
  scriptUri: string; // dist/webview.js
  styleUri: string; // media/chat.css
}

export function chatPageHtml({ cspSource, nonce, scriptUri, styleUri }: PageResources): string {
  // Nothing from the network, not even images: the model's text must not be able to make the view fetch a URL
  // (one carrying what the model read). base-uri and form-action do not fall back to default-src.
  const policy = `default-src 'none'; style-src ${cspSource}; script-src 'nonce-${nonce}'; base-uri 'none'; form-action 'none';`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escape(policy)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${escape(styleUri)}">
<title>warpcode</title>
</head>
<body>
<main id="chat" aria-live="polite"></main>
<form id="composer">
<ul id="completions" role="listbox" aria-label="Commands" hidden></ul>
<textarea id="prompt" rows="3" placeholder="Ask warpcode… (Enter sends, Shift+Enter for a new line)"></textarea>
<div class="composer-buttons"><button type="submit" id="send">Send</button><button type="button" id="stop" hidden>Stop</button></div>
</form>
<script nonce="${escape(nonce)}" src="${escape(scriptUri)}"></script>
</body>
</html>
`;
}
