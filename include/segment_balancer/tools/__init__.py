"""What a person runs: the command line (:mod:`.cli`), one plan in process (:mod:`.pipeline`),
what-if edits, the simulator of many Coordinator runs, the snapshot capture from a live Druid and
the sample generator. May import every other package."""
