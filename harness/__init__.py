"""A stand-in for the host's turn loop, used by the demo, the benchmarks and the tests."""
