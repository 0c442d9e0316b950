"""The engine: one run end to end (`run.execute`), the one epoch loop every training goes
through (`loop.train_epochs`), and how a run uses its hardware: precision, activation
checkpointing and offloading, processes (DDP, FSDP2, the launcher), training checkpoints."""
