"""Generated incidents: templates (specs with a `vary` section), effect models beside the fault roles, and the
instances drawn from them with a derived ground truth (docs/generation.md)."""
