"""warpcode.agent.service: the ACP service: the agent (agent.py) and its sessions (session.py), the update stream,
the session store, the client's file system, the WebSocket server and its start-up line, the request limit."""
