"""Batch jobs: thousands of requests from a JSON Lines file, resumable.

``run_jsonl(requests_path, results_path, runtime=... | composition=...)`` sends
every request line through the runtime with bounded concurrency, a per-route
rate limit and each route's retry policy, appending one result line per request.
Contracts callers may rely on:

- Request and result lines are the formats of ``dsh_llm.batch.requests`` and
  ``dsh_llm.batch.results`` (messages, usage and finish as the protocol's JSON).
- One bad line or one failed call is a failed result row, never a failed run.
- A rerun skips what the results file already holds; killing a run loses
  nothing already written (a torn last line is cut off on the next open), and
  a row counts done only once it is on disk. One run at a time per results
  file (``ResultsFileBusyError`` for the second).
- ``dsh_llm.batch.dask`` runs the same job on a Dask cluster; importing this
  package does not import Dask.
"""

from __future__ import annotations

from dsh_llm.batch.progress import BatchProgress
from dsh_llm.batch.progress import ProgressBar
from dsh_llm.batch.progress import summary_line
from dsh_llm.batch.ratelimit import RouteLimiter
from dsh_llm.batch.requests import BatchRequest
from dsh_llm.batch.requests import RequestLineError
from dsh_llm.batch.requests import parse_request_line
from dsh_llm.batch.requests import read_requests
from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import ResultsFileBusyError
from dsh_llm.batch.results import read_results
from dsh_llm.batch.results import result_from_dict
from dsh_llm.batch.results import result_to_dict
from dsh_llm.batch.runner import BatchSummary
from dsh_llm.batch.runner import run_jsonl

__all__ = [
    "BatchProgress",
    "BatchRequest",
    "BatchResult",
    "BatchSummary",
    "ProgressBar",
    "RequestLineError",
    "ResultsFile",
    "ResultsFileBusyError",
    "RouteLimiter",
    "parse_request_line",
    "read_requests",
    "read_results",
    "result_from_dict",
    "result_to_dict",
    "run_jsonl",
    "summary_line",
]
