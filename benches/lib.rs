//! Benchmark helpers shared by the bench files.
