"""adaptlab inside other loops and tools: Hugging Face Trainer / TRL (`adaptlab.integrations.hf`),
experiment trackers (`adaptlab.integrations.trackers`) and EleutherAI's lm-evaluation-harness
(`adaptlab.integrations.lm_eval`)."""
