"""Runs of tasks: how a run of a task is prepared with the engine (its data read and encoded,
its model loaded with its head and adapted, its objective and test) and `run.execute`, one run
end to end. The tasks below say what a task is; the engine below runs what it is handed; this
layer joins the two (`preparers`: each kind of task and what prepares its runs)."""
