"""ask-another: ask other models for a second opinion or a deep research report."""
