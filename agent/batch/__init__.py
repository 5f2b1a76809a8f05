"""`warpcode batch`: headless agent jobs over many repositories (docs/reference/batch-files.md), in this process.

jobs.py reads JOBS.jsonl, workspaces.py makes each job's throwaway copy, runner.py runs one job into its result
row, results.py keeps RESULTS.jsonl durable, driver.py runs the batch (`--workers` jobs at once); apply.py
turns the rows' patches into branches afterwards (`warpcode batch apply`); ids.py makes an id a file or branch
name and terminal text.
"""
