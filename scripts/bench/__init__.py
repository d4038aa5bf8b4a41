"""The benchmarks of scripts/bench_features.py, a module for each group of subcommands."""
