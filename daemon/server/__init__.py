"""The inference server as a thing on this machine: the real llama-server (``llamacpp``), model files
(``modelfile``), the tiny and real models tests and the demo load, and the prompts sent to a server."""
