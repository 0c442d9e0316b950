"""lm-evaluation-harness tasks that probe what a causal LM could do before it was adapted: the
task YAML, their items (JSONL, written by `adaptlab.data.probe_tasks`) and the loader the YAML
names. Pass this folder as lm-eval's `include` (`adaptlab.data.probe_tasks.probe_task_folder`)."""
