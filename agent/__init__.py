"""warpcode.agent: the agent loop and its parts (loop, context, events and the frame limits they keep, messages,
permissions, prompt, toolbox), the user's settings (config), the headless agent (headless) and the wording of
counts and tables (plural, tables) here;
sub-packages: service/ (the ACP service), backends/ (the model backends), batch/ (batch jobs), and cli/ (the
command line), which nothing else imports: it is argparse and the terminal, over the rest.

Importing this package must stay cheap: no torch, no triton. Local-model code imports them lazily.
"""
