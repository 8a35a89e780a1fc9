// Placeholder so the target builds.
