"""LLM backends (llama.cpp, OpenAI-compatible servers, scripted replies for tests), the response cache and the model registry."""
