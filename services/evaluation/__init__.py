"""Evaluation of a policy on CRUXEval (paper App. C.2): CRUXEval-O is our deduction solver task, CRUXEval-I our
abduction solver task, asked with our solver prompts (Figs 37-38) and judged by our executor's answer checks.

- `cruxeval`: pure: rows, splits, per-sample records, score aggregation, the metrics-line keys.
- `dataset`: reading a CRUXEval-format JSONL file (errors name the line).
- `runner`: greedy generation through a coordinator `Rollouts` port and checks through a `CodeExecutor`.
- `periodic`: the coordinator's every-k-steps evaluation (settings `eval_every_steps`, `eval_limit`, `eval_data`).

`azr eval cruxeval` (azr/cli/eval_cmd.py) runs it from the command line.
"""
