"""cukiln inside other frameworks' models: ``cukiln.integrations.transformers`` (Hugging Face transformers v5)."""
