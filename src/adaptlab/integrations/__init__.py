"""adaptlab inside other loops and tools: Hugging Face Trainer / TRL (`adaptlab.integrations.hf`)
and experiment trackers (`adaptlab.integrations.trackers`)."""
