"""The engine: the one epoch loop every training goes through (`loop.train_epochs`) over the
objective a run is handed, how a run uses its hardware (precision, activation checkpointing
and offloading, processes: DDP, FSDP2, the launcher), training checkpoints, the run folder, and
generating text (for evaluation and serving). One run end to end is `adaptlab.runs.run`."""
