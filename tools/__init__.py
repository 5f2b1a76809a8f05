"""warpcode.tools: the agent's hands (workspace, files, search, edits, patches, tests, checkpoints, code map).

Knows nothing of models or protocols, and never imports torch.
"""
