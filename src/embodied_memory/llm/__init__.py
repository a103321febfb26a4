"""LLM access: an OpenAI-compatible chat client, a local in-process model, token counting."""
