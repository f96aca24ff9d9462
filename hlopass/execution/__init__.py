"""Running modules: XLA's private APIs (the oracle), JAX integration, seeded random inputs."""
