"""What every layer may use and nothing of this project's: files written whole or not at all
(:mod:`.files`), the machine's cache of what was computed from a file's content (:mod:`.cache`)
and two Spark column helpers that need no session (:mod:`.spark_columns`).
Imports nothing of ``segment_balancer``."""
