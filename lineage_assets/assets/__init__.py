"""The pipeline's software-defined assets, one module per domain."""
