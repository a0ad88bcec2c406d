"""The policy-value transformer: tokenizer, blocks, heads, configuration and sizes, atomic
checkpoints, and a trained network's exact full-turn score."""
