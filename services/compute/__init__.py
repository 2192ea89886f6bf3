"""The machine a process runs on: what its CPU can do (`cpu_features`: native bf16), how many threads torch takes
beside the sandbox workers (`torch_threads`), and giving a large transient allocation back to the system
(`process_memory`)."""
