"""The ``dsh-llm`` command line (also ``python -m dsh_llm``).

- ``main``: the parser and the dispatch of each subcommand (``main`` and
  ``build_parser`` are re-exported here; the console script is ``dsh_llm.cli:main``);
- ``targets``: choosing a route (``--provider``, ``--base-url``, ``--config``);
- ``chat``, ``demo``: the two commands that stream; ``console``: printing chunks;
- ``interrupt``: Ctrl-C as an abort;
- ``logs`` (``logdb``: the SQLite log), ``keys``, ``models`` (the default model and
  aliases), ``attach`` (``chat -a``): what the command line keeps between commands,
  under the user's directories (``userdirs``);
- ``parser``: the argparse parser that suggests the closest name; ``usage``:
  ``UsageError`` (exit status 2).
"""

from __future__ import annotations

from dsh_llm.cli.main import build_parser
from dsh_llm.cli.main import main

__all__ = ["build_parser", "main"]
