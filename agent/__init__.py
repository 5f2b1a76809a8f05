"""warpcode.agent: the agent loop and its parts (loop, context, events and the frame limits they keep, messages,
permissions, prompt, toolbox) here;
sub-packages: service/ (the ACP service), backends/ (the model backends), cli/ (the command line), batch/ next.

Importing this package must stay cheap: no torch, no triton. Local-model code imports them lazily.
"""
