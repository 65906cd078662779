"""Model architectures: specs read from Hugging Face config.json, presets, and derived sizes."""
