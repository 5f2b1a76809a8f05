"""Worker process of the cold code-map parse: `python -m warpcode.tools.tag_worker`.

Reads a JSON list of [rel, path, language, root] jobs on stdin and writes [rel, tags] pairs on stdout. A module of
its own, so that running it does not re-execute a module the package has already imported.
"""

from __future__ import annotations

import json
import sys

from warpcode.tools.tag_cache import parse_one

if __name__ == "__main__":
    json.dump([parse_one(tuple(job)) for job in json.load(sys.stdin)], sys.stdout)
