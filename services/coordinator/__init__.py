"""The coordinator: Algorithm 1 (buffer initialisation, then propose → validate → solve → reward → episodes per step).

In-process in the embedded profile (`azr run`), its own process in the distributed one (`azr coordinator`).
"""
