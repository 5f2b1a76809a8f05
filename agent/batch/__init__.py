"""`warpcode batch`: headless agent jobs over many repositories (docs/reference/batch-files.md), in this process or
on Ray.

jobs.py reads JOBS.jsonl, workspaces.py makes each job's throwaway copy, runner.py runs one job into its result
row (job_tests.py its test_command), results.py keeps RESULTS.jsonl durable, driver.py runs the batch as
config.py says (`--workers` jobs at once, here or on Ray: ray_pool.py), recorder.py takes each finished row;
apply.py turns the rows' patches into branches afterwards (`warpcode batch apply`); ids.py makes an id a file or
branch name and terminal text.
"""
