"""The algorithm's pure core: no I/O, no clocks, no randomness that is not passed in."""
