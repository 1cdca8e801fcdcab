"""``python -m dsh_llm`` runs the ``dsh-llm`` command line."""

from __future__ import annotations

import sys

from dsh_llm.cli import main

if __name__ == "__main__":
    sys.exit(main())
