"""The greedy kernels the stages run on one tier's live run state: loading (stages 1–6, 8, 9),
balancing (7, 10, 11), the stage-3 callbacks, unloading (12), and the decision records."""
