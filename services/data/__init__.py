"""Data shipped with the package: the authors' seed triplets (seeds/README.md)."""
