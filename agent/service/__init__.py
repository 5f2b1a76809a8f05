"""warpcode.agent.service: the ACP service: the agent (agent.py) and its sessions (session.py), the update stream,
the session store, the client's file system, the WebSocket server, the request limit and the service benchmark."""
