"""Query agent: tools over the memory, planners (llm | rules | full_context), the typed answer."""
