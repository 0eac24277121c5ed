"""Training: our AdamW, schedule, clipping, loss, data, checkpoints and the loop."""
