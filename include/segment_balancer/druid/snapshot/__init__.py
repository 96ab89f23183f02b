"""The input snapshot directory (docs/ARCHITECTURE.md "Input snapshot directory"): models and
readers of the small JSON files, Spark readers of ``segments.jsonl`` and ``server_segments``, and
the one error every bad input raises (``SnapshotError(file, row, problem)``)."""
