"""warpcode.agent: the agent loop, model backends, ACP service, CLI and batch jobs.

Importing this package must stay cheap: no torch, no triton. Local-model code imports them lazily.
"""
